#include "cli/harness.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <regex>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "cache/cache_location.h"
#include "cli/capture_server.h"
#include "cli/interrupt.h"
#include "cli/plan_verifier.h"
#include "hooks/process.h"

namespace shardproof::cli {
namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

bool holds_front_end(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "shardproof_torch" / "__main__.py", ec);
}

// The directory that holds the `shardproof_torch` package: the environment's
// override, the source tree this binary was built from, or the installed
// copy beside the binary (PREFIX/share/shardproof/frontends/torch). Empty:
// none found (then the interpreter's own sys.path is all there is).
std::string front_end_dir() {
  if (const char* dir = std::getenv("SHARDPROOF_TORCH_FRONTEND"); dir && *dir) return dir;
#ifdef SHARDPROOF_FRONTEND_DIR
  if (holds_front_end(SHARDPROOF_FRONTEND_DIR)) return SHARDPROOF_FRONTEND_DIR;
#endif
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share/shardproof/frontends/torch";
    if (holds_front_end(installed)) return installed.string();
  }
  return "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The front end's `file:line: [rule] text` line (its last one on stderr).
struct Located {
  std::string file, rule, text;
  int line = 0;
};
std::optional<Located> located_line(const std::string& err) {
  static const std::regex pattern(R"(^(.+?):([0-9]+): \[([A-Za-z0-9_-]+)\] (.*)$)");
  std::optional<Located> last;
  size_t start = 0;
  while (start < err.size()) {
    size_t end = err.find('\n', start);
    if (end == std::string::npos) end = err.size();
    const std::string line = err.substr(start, end - start);
    std::smatch m;
    if (std::regex_match(line, m, pattern)) {
      try {
        last = Located{m[1], m[3], m[4], std::stoi(m[2])};
      } catch (const std::exception&) {  // a line number beyond int: not ours
      }
    }
    start = end + 1;
  }
  return last;
}

}  // namespace

bool is_harness_path(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0;
}

std::string captures_dir() {
  const std::string dir = cache::default_cache_dir();
  return dir.empty() ? "" : (fs::path(dir) / "captures").string();
}

CaptureOutcome capture_harness(const std::string& harness, const std::string& mesh,
                               const std::string& output, const std::string& cwd,
                               const std::string& captures) {
  const std::string python = env_or("SHARDPROOF_PYTHON", "/usr/bin/python3");
  std::vector<std::string> argv = {python, "-m",   "shardproof_torch", "capture",  harness,
                                   "-o",   output, "--emit",           "src,scale"};
  if (!mesh.empty()) argv.insert(argv.end(), {"--mesh", mesh});
  if (!captures.empty()) argv.insert(argv.end(), {"--cache-dir", captures});
  hooks::ProcessOptions options;
  options.cwd = cwd;
  const std::string dir = front_end_dir();
  if (!dir.empty()) {
    const std::string old = env_or("PYTHONPATH", "");
    options.env.push_back("PYTHONPATH=" + dir + (old.empty() ? "" : ":" + old));
  }
  CaptureOutcome out;
  hooks::ProcessResult r = capture_through_server(
      python, std::vector<std::string>(argv.begin() + 3, argv.end()), options,
      [&] { return hooks::run_process(argv, options); }, &out.start_capture_server);
  out.message = trim(r.err);
  if (r.exit_code == 0 || r.exit_code == 2) {
    out.exit_code = r.exit_code;
    return out;
  }
  // The front end could not even start: say what to install or set.
  const std::string where = dir.empty() ? "" : " (front end: " + dir + ")";
  if (r.exit_code == -1) {
    out.exit_code = 2;
    // run_process's own text already says "cannot run <python>: why".
    const std::string why = out.message.rfind("cannot run ", 0) == 0
                                ? out.message
                                : "cannot run " + python + ": " + out.message;
    out.message = harness + ":1: [python] " + why + "; install python3 or set SHARDPROOF_PYTHON";
  } else if (out.message.find("No module named 'torch'") != std::string::npos) {
    out.exit_code = 2;
    out.message = harness + ":1: [torch-missing] " + python +
                  " cannot import torch; install python3-torch (scripts/setup.sh) or set "
                  "SHARDPROOF_PYTHON to an interpreter that has it";
  } else if (out.message.find("No module named shardproof_torch") != std::string::npos) {
    out.exit_code = 2;
    out.message = harness + ":1: [front-end-missing] " + python +
                  " cannot find the shardproof_torch package" + where +
                  "; set SHARDPROOF_TORCH_FRONTEND to the directory that holds it "
                  "(frontends/torch of the source tree)";
  } else {
    out.exit_code = 4;
    if (out.message.empty())
      out.message = "the front end (" + python + " -m shardproof_torch) exited with code " +
                    std::to_string(r.exit_code) + where;
  }
  return out;
}

Report capture_failure_report(const std::string& harness, const CaptureOutcome& outcome) {
  Report r;
  r.plan_path = harness;
  if (outcome.exit_code != 2) {
    r.verdict = Verdict::InternalError;
    r.error = "capturing " + harness + " failed: " + outcome.message;
    return r;
  }
  r.verdict = Verdict::Invalid;
  static const std::regex ruled(R"(^\[([A-Za-z0-9_-]+)\] ([\s\S]*)$)");
  std::smatch m;
  if (std::optional<Located> at = located_line(outcome.message)) {
    r.invalid = Diagnostic{at->rule, at->file, "", at->line, 0, at->text};
  } else if (std::regex_match(outcome.message, m, ruled)) {
    // "[harness-file] no harness file at ...": its own rule, and no line of a
    // file that may not exist.
    r.invalid = Diagnostic{m[1], harness, "", fs::exists(harness) ? 1 : 0, 0, m[2]};
  } else {
    r.invalid = Diagnostic{"harness", harness, "", 1, 0, outcome.message};
  }
  return r;
}

Report verify_harness(PlanVerifier& verifier, const std::string& harness, const std::string& mesh,
                      const VerifyOptions& options, const std::string& cwd,
                      std::optional<std::string>* plan_text) {
  CaptureDir dir;
  const std::string plan = dir.path() + "/" + fs::path(harness).stem().string() + ".plan.json";
  const CaptureOutcome outcome =
      capture_harness(harness, mesh, plan, cwd, verifier.caches() ? captures_dir() : "");
  if (outcome.exit_code != 0) {
    // An invalid harness is fixed and captured again: serve that one.
    if (outcome.exit_code == 2 && outcome.start_capture_server) outcome.start_capture_server();
    return capture_failure_report(harness, outcome);
  }
  // No plan text for the CI formats: a finding without a source line
  // points at the harness itself, not at a line of a temporary plan.
  Report report = verifier.verify(plan, options, plan_text);
  if (outcome.start_capture_server) outcome.start_capture_server();
  if (report.verdict == Verdict::Invalid || report.verdict == Verdict::InternalError) {
    dir.keep();
    std::cerr << "shardproof: the plan captured from " << harness << " is kept at " << plan << "\n";
    return report;
  }
  report.plan_path = harness;
  return report;
}

CaptureDir::CaptureDir() {
  std::string tmpl = env_or("TMPDIR", "/tmp") + "/shardproof-capture-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a temporary directory in " + tmpl);
  path_ = tmpl;
  remove_on_interrupt(path_);  // Ctrl-C leaves no captured plan behind
}

CaptureDir::~CaptureDir() {
  forget_on_interrupt(path_);
  if (keep_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace shardproof::cli
