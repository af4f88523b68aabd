#include "cli/plan_verifier.h"

#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "cache/cached_verify.h"
#include "cli/daemon_backend.h"
#include "cli/local_cache.h"
#include "engine/format/file_text.h"
#include "engine/format/plan_text.h"

namespace shardproof::cli {
namespace {

// The engine straight from the files: for plans that cannot be read or are
// invalid, so the report names the real files, lines and columns.
Report verify_from_files(const std::string& path, const VerifyOptions& options) {
  // verify_plan_file promises not to throw; a slip must still become a
  // report, not a crash that loses the other plans' answers.
  try {
    return verify_plan_file(path, options);
  } catch (const std::exception& e) {
    Report r;
    r.plan_path = path;
    r.verdict = Verdict::InternalError;
    r.error = std::string("unexpected exception: ") + e.what();
    return r;
  }
}

// A plan path that names nothing readable (missing, a directory, not
// ours to read) is a mistake on the command line, not a failure of the
// tool: invalid input, exit 2, naming the path.
bool is_users_mistake(const std::string& path) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  return !std::filesystem::exists(st) || std::filesystem::is_directory(st) ||
         access(path.c_str(), R_OK) != 0;
}

Report unreadable_input(const std::string& path, const std::string& why) {
  Report r;
  r.plan_path = path;
  r.verdict = Verdict::Invalid;
  Diagnostic d;
  d.rule = "plan-file";
  d.file = path;
  d.message = why;
  r.invalid = d;
  return r;
}

std::string plan_dir(const std::string& path) {
  if (path == kStdinName) return "";
  return std::filesystem::path(path).parent_path().string();
}

void warn(const std::string& message) {
  std::cerr << "shardproof: warning: " << message << "\n";
}

}  // namespace

PlanVerifier::PlanVerifier(const VerifyArgs& args) : args_(args) {
  if (args.no_cache) {
    backend_ = std::make_unique<InProcessBackend>(nullptr);
  } else if (args.no_daemon || args.classes) {  // the daemon's protocol has no --classes
    backend_ = in_process();
  } else {
    std::vector<std::string> run_args;
    if (args.jobs > 0) run_args = {"--jobs", std::to_string(args.jobs)};
    Status status;
    backend_ = connect_daemon(run_args, &status);
    if (!backend_) {
      warn("not using the daemon: " + status.message());
      backend_ = in_process();
    }
  }
}

Report PlanVerifier::verify(const std::string& path, const VerifyOptions& options,
                            std::optional<std::string>* text_read) {
  // "-" is the plan on stdin; its graph references are relative to the
  // working directory.
  const bool from_stdin = path == kStdinPath;
  std::string why;
  std::optional<std::string> original = read_file_text(from_stdin ? "/dev/stdin" : path, &why);
  if (!original && (from_stdin || is_users_mistake(path)))
    return unreadable_input(from_stdin ? kStdinName : path, why);
  if (!original) {
    VerifyOptions plain = options;
    plain.progress = nullptr;
    return verify_from_files(path, plain);
  }
  Report report = verify_text(from_stdin ? kStdinName : path, *original, options);
  if (text_read) *text_read = std::move(original);  // after: moved, not copied
  return report;
}

Report PlanVerifier::verify_text(const std::string& path, const std::string& original,
                                 const VerifyOptions& options) {
  VerifyOptions plain = options;
  plain.progress = nullptr;
  // What the backends take: the plan with its graph files inlined (most
  // plans have none: then the text as read, not a copy). When inlining
  // fails, or the plan is invalid, the engine parses the original text as
  // it parses a file, so the report names the real files, lines and columns
  // (without reading the plan twice: it may be a pipe).
  std::optional<std::string> inlined;
  const std::string* text = &original;
  if (has_graph_references(original)) {
    std::string why;
    inlined = inline_graph_references(original, plan_dir(path), &why);
    if (!inlined) return verify_plan_text(path, original, plan_dir(path), plain);
    text = &*inlined;
  }
  std::optional<Report> report;
  try {
    report = backend_->verify(path, *text, options);
  } catch (const std::exception&) {
    report.reset();  // treated as the daemon failing: verified in process below
  }
  if (!report) {
    auto* daemon = dynamic_cast<DaemonBackend*>(backend_.get());
    warn("the daemon failed (" + (daemon ? daemon->last_error() : std::string("?")) + ")");
    if (daemon && daemon->timed_out()) {
      // A stopped daemon may hold the cache's write lock: no cache here.
      warn("verifying in process without the cache");
      backend_ = std::make_unique<InProcessBackend>(nullptr);
    } else {
      backend_ = in_process();
    }
    report = backend_->verify(path, *text, options);
  }
  if (report->verdict == Verdict::Invalid)
    return verify_plan_text(path, original, plan_dir(path), plain);
  return std::move(*report);
}

std::unique_ptr<VerifyBackend> PlanVerifier::in_process() {
  Status status;
  std::unique_ptr<cache::VerdictCache> c = open_local_cache(&status);
  if (!c) warn("verifying without the cache: " + status.message());
  if (!args_.no_daemon && !args_.no_cache) warn("verifying in process");
  return std::make_unique<InProcessBackend>(std::move(c));
}

}  // namespace shardproof::cli
