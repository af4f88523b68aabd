// `shardproof verify PLAN.json...`: verifies each plan through the daemon
// (started when none answers) or, with --no-daemon, with the same engine
// and cache in process, and prints one report per plan. The report is the
// same either way. The exit code is that of the most severe verdict.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/formats/report_formats.h"
#include "cli/harness.h"
#include "cli/plan_verifier.h"
#include "cli/settings.h"
#include "cli/usage.h"
#include "engine/report/report.h"
#include "engine/report/report_codec.h"
#include "engine/verifier.h"

namespace shardproof::cli {

namespace {

// Progress on stderr. On a terminal: "path: stages done/total, N cached, M
// solving" on one rewritten line, erased when the plan is done. In a log
// (a pipe or a file, as in CI): nothing for a run shorter than kLogEvery,
// then the same text as a plain line every kLogEvery, so a long run shows
// it is alive without filling the log ($SHARDPROOF_PROGRESS_EVERY_MS sets
// another period). The engine may call it from solver threads, hence the
// mutex.
class ProgressLine {
 public:
  enum class Mode { Off, Terminal, Log };
  static constexpr std::chrono::milliseconds kLogEvery{5000};

  explicit ProgressLine(Mode mode) : mode_(mode) {
    if (const char* ms = std::getenv("SHARDPROOF_PROGRESS_EVERY_MS"))
      log_every_ = std::chrono::milliseconds(std::strtoll(ms, nullptr, 10));
  }
  ~ProgressLine() { clear(); }

  std::function<void(const VerifyProgress&)> callback(const std::string& path) {
    if (mode_ == Mode::Off) return {};
    last_ = std::chrono::steady_clock::now();  // a log's first line after kLogEvery
    return [this, path](const VerifyProgress& p) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto now = std::chrono::steady_clock::now();
      if (mode_ == Mode::Log) {
        if (now - last_ < log_every_) return;
        last_ = now;
        std::cerr << text(path, p) << "\n" << std::flush;
        return;
      }
      // Thousands of cached stages finish in a blink: redraw at most 10 times
      // a second (and always the last), so the terminal is not the bottleneck.
      if (p.done < p.total && shown_ && now - last_ < std::chrono::milliseconds(100)) return;
      last_ = now;
      std::cerr << "\r\033[K" << text(path, p) << std::flush;
      shown_ = true;
    };
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  static std::string text(const std::string& path, const VerifyProgress& p) {
    if (std::string_view(p.status) == "exploring")  // the class verifier, before its stages
      return path + ": " + (p.stage.empty() ? std::string("class corners") : p.stage) +
             ", corners " + std::to_string(p.done) + "/" + std::to_string(p.total);
    return path + ": stages " + std::to_string(p.done) + "/" + std::to_string(p.total) + ", " +
           std::to_string(p.cached) + " cached, " + std::to_string(p.solving) + " solving";
  }

  Mode mode_;
  std::chrono::milliseconds log_every_ = kLogEvery;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
  std::mutex mutex_;
};

// nlohmann::json sorts keys; a person reading the report wants the verdict
// first and the error last, in the order docs/cli.md lists them.
nlohmann::ordered_json in_schema_order(const nlohmann::json& report) {
  static const char* const kTop[] = {"verdict",  "plan",  "name", "meta",
                                     "findings", "stats", "error"};
  static const char* const kFinding[] = {"kind",         "stage",    "tensor", "parallel_tensors",
                                         "also_failing", "elements", "ops",    "counterexample",
                                         "message"};
  static const char* const kStats[] = {
      "stages",      "unique_stages", "proven_trivially", "solved",        "refuted_by_testing",
      "symmetric",   "untried",       "cached",           "shared_proofs", "reused",
      "logical_ops", "parallel_ops",  "seconds",          "phases"};
  static const char* const kError[] = {"rule", "file", "pointer", "line", "column", "message"};
  auto ordered = [](const nlohmann::json& j, const auto& keys) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const char* k : keys) {
      if (j.contains(k)) out[k] = j[k];
    }
    for (const auto& [k, v] : j.items()) {  // keys added later stay visible
      if (!out.contains(k)) out[k] = v;
    }
    return out;
  };
  nlohmann::ordered_json out = ordered(report, kTop);
  if (report.contains("findings")) {
    out["findings"] = nlohmann::ordered_json::array();
    for (const auto& f : report["findings"]) out["findings"].push_back(ordered(f, kFinding));
  }
  if (report.contains("stats")) out["stats"] = ordered(report["stats"], kStats);
  if (report.contains("error")) out["error"] = ordered(report["error"], kError);
  return out;
}

std::string summary_line(const std::vector<LocatedReport>& reports) {
  int counts[5] = {0, 0, 0, 0, 0};
  for (const LocatedReport& r : reports) counts[verdict_exit_code(r.report.verdict)]++;
  const Verdict order[] = {Verdict::Equivalent, Verdict::NotEquivalent, Verdict::Invalid,
                           Verdict::Unknown, Verdict::InternalError};
  std::string out = std::to_string(reports.size()) + " plans:";
  bool first = true;
  for (Verdict v : order) {
    int n = counts[verdict_exit_code(v)];
    if (n == 0) continue;
    out += (first ? " " : ", ") + std::to_string(n) + " " + verdict_name(v);
    first = false;
  }
  return out;
}

// --output's formats: --format's, and html (a page, not for a terminal).
const char* const kFormats[] = {"text", "json", "github", "junit", "sarif", "html"};

// Every report in one format, whole (what stdout shows for a batch).
std::string render(const std::string& format, const std::vector<LocatedReport>& reports) {
  if (format == "junit") return render_junit(reports);
  if (format == "sarif") return render_sarif(reports);
  if (format == "html") return render_html(reports);
  std::string out;
  if (format == "json") {
    nlohmann::ordered_json j;
    if (reports.size() == 1) {
      j = in_schema_order(report_to_json(reports.front().report));
    } else {
      j = nlohmann::ordered_json::array();
      for (const LocatedReport& r : reports) j.push_back(in_schema_order(report_to_json(r.report)));
    }
    // Messages may quote bytes of a garbage input; invalid UTF-8 is replaced
    // (U+FFFD) rather than thrown, so the report is always valid JSON.
    return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  }
  GithubAnnotations annotations;
  for (const LocatedReport& r : reports) {
    if (format == "github") {
      out += annotations.render(r);
    } else {
      if (!out.empty()) out += "\n";
      out += render_text(r);
    }
  }
  out += annotations.finish();
  if (reports.size() > 1 && format != "github")
    out += (format == "text" ? "\n" : "") + summary_line(reports) + "\n";
  return out;
}

// FORMAT=FILE, FORMAT one of kFormats and FILE not empty.
std::string check_output_spec(const std::string& spec) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq + 1 == spec.size())
    return "expected FORMAT=FILE, e.g. sarif=results.sarif";
  std::string format = spec.substr(0, eq);
  for (const char* f : kFormats)
    if (format == f) return "";
  return "unknown format \"" + format + "\" (text, json, github, junit, sarif or html)";
}

// Written beside and then renamed over FILE: a reader never sees half a report.
bool write_output(const std::string& spec, const std::vector<LocatedReport>& reports) {
  size_t eq = spec.find('=');
  std::string path = spec.substr(eq + 1), tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << render(spec.substr(0, eq), reports);
    out.close();
    if (out && std::rename(tmp.c_str(), path.c_str()) == 0) return true;
  }
  std::cerr << "shardproof verify: cannot write " << path << ": " << std::strerror(errno) << "\n";
  std::remove(tmp.c_str());
  return false;
}

// In a GitHub Actions step ($GITHUB_STEP_SUMMARY set): the Markdown
// summary, appended as the runner expects.
bool write_step_summary(const std::vector<LocatedReport>& reports) {
  const char* path = std::getenv("GITHUB_STEP_SUMMARY");
  if (path == nullptr || *path == '\0') return true;
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out << render_step_summary(reports);
  out.close();
  if (out) return true;
  std::cerr << "shardproof verify: cannot write the step summary " << path << ": "
            << std::strerror(errno) << "\n";
  return false;
}

}  // namespace

CLI::App* add_verify_command(CLI::App& app, VerifyArgs& args) {
  CLI::App* cmd = app.add_subcommand("verify",
                                     "Prove that each plan's parallel graph computes "
                                     "exactly what its logical graph computes");
  cmd->add_option("plans", args.plans,
                  "Plan files (format shardproof-plan/1 or its compact form 1.1; - reads stdin), "
                  "or torch harnesses (.py), which are "
                  "captured first")
      ->required();
  cmd->add_option("--mesh", args.mesh,
                  "Harnesses: mesh sizes overriding their MESH, e.g. dp=2,tp=4");
  cmd->add_option("--format", args.format,
                  "Output format: text, json, or for CI github (workflow commands), junit (XML), "
                  "sarif (2.1.0)")
      ->check(CLI::IsMember({"text", "json", "github", "junit", "sarif"}))
      ->capture_default_str();
  cmd->add_option("--output", args.outputs,
                  "Also write the reports to FILE in FORMAT, FORMAT=FILE (repeatable; e.g. "
                  "--output sarif=results.sarif --output html=report.html; html is a "
                  "self-contained page): one verification, several outputs")
      ->allow_extra_args(false)
      ->check(CLI::Validator(check_output_spec, "FORMAT=FILE"));
  add_setting_flags(cmd, {"jobs", "rlimit", "timeout_ms", "unknown"}, args.setting_flags);
  cmd->add_option("--infer-claims", args.infer_claims,
                  "Propose claims on unclaimed intermediates by matching values, each proven "
                  "before it cuts the plan (auto: for plans captured from a program)")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", args.quiet, "No progress line on stderr");
  cmd->add_flag("--no-daemon", args.no_daemon,
                "Verify in this process (same engine, same cache) instead of through the daemon");
  cmd->add_flag("--no-cache", args.no_cache,
                "Verify in this process without reading or writing the cache");
  cmd->add_flag("--classes", args.classes,
                "Verify a compact (1.1) plan per coordinate class even when it is small enough "
                "to expand (larger ones always are); runs in this process");
  return cmd;
}

int run_verify(const VerifyArgs& given) {
  VerifyArgs args = given;
  Settings settings = resolve_and_export_local_settings(args.setting_flags);
  args.jobs = settings.jobs;
  args.rlimit = settings.rlimit;
  args.timeout_ms = settings.timeout_ms;
  args.block_unknown = settings.block_unknown;
  VerifyOptions options;
  options.jobs = args.jobs;
  options.rlimit = args.rlimit;
  options.timeout_ms = args.timeout_ms;
  options.infer_claims = parse_claim_inference(args.infer_claims).value_or(ClaimInference::Auto);
  if (args.classes) options.parse.compact = ParseOptions::Compact::Classes;
  // A plan's mesh is fixed when it is written: --mesh on one would be
  // ignored, and a user who asked for tp=4 would get tp=2's answer.
  if (!args.mesh.empty())
    for (const std::string& path : args.plans)
      if (!is_harness_path(path)) {
        std::cerr << "shardproof verify: --mesh applies to harnesses (.py) only, and " << path
                  << " is a plan: its mesh is the one it was written for (capture or plan it "
                     "again at the mesh you want)\n";
        return kExitUsage;
      }

  // A live line on a terminal; in a pipe or a CI log, a line every few
  // seconds of a long run only.
  ProgressLine progress(args.quiet              ? ProgressLine::Mode::Off
                        : isatty(STDERR_FILENO) ? ProgressLine::Mode::Terminal
                                                : ProgressLine::Mode::Log);

  // Every format but json names lines or ranks: findings are looked up in
  // the plan's text (only when there are findings).
  PlanVerifier verifier(args);
  GithubAnnotations annotations;
  std::vector<LocatedReport> reports;
  Verdict worst = Verdict::Equivalent;
  for (const std::string& path : args.plans) {
    options.progress = progress.callback(path);
    std::optional<std::string> text;
    const bool harness = is_harness_path(path);
    Report report = harness ? verify_harness(verifier, path, args.mesh, options, "", &text)
                            : verifier.verify(path, options, &text);
    progress.clear();
    reports.push_back(locate_report(std::move(report), text ? &*text : nullptr, harness));
    const Report& r = reports.back().report;
    if (verdict_severity(r.verdict) > verdict_severity(worst)) worst = r.verdict;
    // Text and github reports stream as they finish: a long batch shows
    // answers early.
    if (args.format == "text") {
      if (reports.size() > 1) std::cout << "\n";
      std::cout << render_text(reports.back()) << std::flush;
    } else if (args.format == "github") {
      std::cout << annotations.render(reports.back()) << std::flush;
    }
  }
  if (args.format == "github") std::cout << annotations.finish();

  if (args.format == "json" || args.format == "junit" || args.format == "sarif") {
    std::cout << render(args.format, reports);
  } else if (reports.size() > 1) {
    std::cout << (args.format == "text" ? "\n" : "") << summary_line(reports) << "\n";
  }
  bool written = true;
  for (const std::string& spec : args.outputs) written = write_output(spec, reports) && written;
  written = write_step_summary(reports) && written;
  std::cout.flush();
  if (!std::cout || !written) return kExitInternal;  // the answer was lost
  if (worst == Verdict::Unknown && !args.block_unknown) {
    std::cerr << "shardproof: warning: undecided (unknown) plans let through: \"unknown\" is "
                 "\"warn\" ("
              << settings.get("unknown").origin << ")\n";
    return kExitOk;
  }
  return verdict_exit_code(worst);
}

}  // namespace shardproof::cli
