// `shardproof verify PLAN.json...`: verifies each plan in process and prints
// one report per plan. The exit code is that of the most severe verdict.
#include <unistd.h>

#include <exception>
#include <iostream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/report.h"
#include "engine/verifier.h"

namespace shardproof::cli {

namespace {

// Shows "path: stages done/total" on one rewritten line of stderr. The engine
// may call it from solver threads, hence the mutex.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  ~ProgressLine() { clear(); }

  std::function<void(int64_t, int64_t)> callback(const std::string& path) {
    if (!enabled_) return {};
    return [this, path](int64_t done, int64_t total) {
      std::lock_guard<std::mutex> lock(mutex_);
      std::cerr << "\r\033[K" << path << ": stages " << done << "/" << total << std::flush;
      shown_ = true;
    };
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shown_) std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  std::mutex mutex_;
};

Report verify_one(const std::string& path, const VerifyOptions& options) {
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

std::string summary_line(const std::vector<Report>& reports) {
  int counts[5] = {0, 0, 0, 0, 0};
  for (const Report& r : reports) counts[verdict_exit_code(r.verdict)]++;
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

}  // namespace

CLI::App* add_verify_command(CLI::App& app, VerifyArgs& args) {
  CLI::App* cmd = app.add_subcommand("verify", "Prove that each plan's parallel graph computes "
                                               "exactly what its logical graph computes");
  cmd->add_option("plans", args.plans, "Plan files (format shardproof-plan/1)")->required();
  cmd->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->add_option("--jobs,-j", args.jobs, "Solver threads (0: all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--rlimit", args.rlimit,
                  "Z3 resource limit per claim query (deterministic; exceeded: unknown)")
      ->capture_default_str();
  cmd->add_flag("--quiet,-q", args.quiet, "No progress line on stderr");
  return cmd;
}

int run_verify(const VerifyArgs& args) {
  VerifyOptions options;
  options.jobs = args.jobs;
  options.rlimit = args.rlimit;

  // Progress is for people: never written into a pipe or a CI log.
  ProgressLine progress(!args.quiet && isatty(STDERR_FILENO));

  std::vector<Report> reports;
  Verdict worst = Verdict::Equivalent;
  for (const std::string& path : args.plans) {
    options.progress = progress.callback(path);
    reports.push_back(verify_one(path, options));
    progress.clear();
    if (verdict_severity(reports.back().verdict) > verdict_severity(worst)) {
      worst = reports.back().verdict;
    }
    // Text reports stream as they finish: a long batch shows answers early.
    if (args.format == "text") {
      if (reports.size() > 1) std::cout << "\n";
      std::cout << report_to_text(reports.back()) << std::flush;
    }
  }

  if (args.format == "json") {
    nlohmann::json out;
    if (reports.size() == 1) {
      out = report_to_json(reports.front());
    } else {
      out = nlohmann::json::array();
      for (const Report& r : reports) out.push_back(report_to_json(r));
    }
    std::cout << out.dump(2) << "\n";
  } else if (reports.size() > 1) {
    std::cout << "\n" << summary_line(reports) << "\n";
  }
  std::cout.flush();
  if (!std::cout) return kExitInternal;  // stdout closed: the answer was lost
  return verdict_exit_code(worst);
}

}  // namespace shardproof::cli
