#include "engine/verifier.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "engine/plan_parser.h"
#include "engine/shape_reduction.h"
#include "engine/stage.h"
#include "engine/stage_prover.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

int worker_count(int requested, size_t work) {
  int n = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  return static_cast<int>(std::min<size_t>(n, std::max<size_t>(work, 1)));
}

// Folds stage outcomes into the plan's verdict: any refuted claim makes it
// not equivalent; otherwise any undecided stage makes it unknown.
void combine(const std::vector<StageOutcome>& outcomes, Report& report) {
  bool refuted = false, unknown = false;
  for (const StageOutcome& o : outcomes) {
    report.stats.solved += o.queries > 0 ? 1 : 0;
    report.stats.proven_trivially += o.trivial ? 1 : 0;
    switch (o.status) {
      case StageStatus::Proven: break;
      case StageStatus::Refuted: refuted = true; break;
      case StageStatus::Unknown: unknown = true; break;
      case StageStatus::InternalError:
        if (report.error.empty()) report.error = o.error;
        break;
    }
    for (const Finding& f : o.findings) report.findings.push_back(f);
  }
  if (!report.error.empty())
    report.verdict = Verdict::InternalError;
  else if (refuted)
    report.verdict = Verdict::NotEquivalent;
  else if (unknown)
    report.verdict = Verdict::Unknown;
  else
    report.verdict = Verdict::Equivalent;
  // Mismatches first: they are what the user must act on.
  std::stable_partition(report.findings.begin(), report.findings.end(),
                        [](const Finding& f) { return f.kind == "mismatch"; });
}

}  // namespace

Report verify_plan(const Plan& plan, const VerifyOptions& options) {
  auto start = Clock::now();
  Report report;
  report.plan_path = plan.path;
  report.plan_name = plan.name;
  report.meta = nlohmann::json::parse(plan.meta_json.empty() ? "{}" : plan.meta_json, nullptr,
                                      false);
  if (report.meta.is_discarded()) report.meta = nlohmann::json::object();
  report.stats.logical_ops = static_cast<int64_t>(plan.logical.ops.size());
  report.stats.parallel_ops = static_cast<int64_t>(plan.parallel.ops.size());
  try {
    std::vector<Stage> stages = build_stages(plan);
    report.stats.stages = static_cast<int64_t>(stages.size());
    std::vector<StageOutcome> outcomes(stages.size());
    ProverOptions prover{options.rlimit, options.max_stage_elements};
    std::atomic<size_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex progress_mutex;
    auto work = [&] {
      for (size_t i = next++; i < stages.size(); i = next++) {
        if (options.reduce_shapes) reduce_stage(stages[i]);
        outcomes[i] = prove_stage(stages[i], prover);
        int64_t finished = ++done;
        if (options.progress) {
          std::lock_guard<std::mutex> lock(progress_mutex);
          options.progress(finished, static_cast<int64_t>(stages.size()));
        }
      }
    };
    std::vector<std::thread> threads;
    int n = worker_count(options.jobs, stages.size());
    for (int i = 1; i < n; ++i) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    combine(outcomes, report);
  } catch (const std::exception& e) {
    report.verdict = Verdict::InternalError;
    report.error = e.what();
  }
  report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

Report verify_plan_file(const std::string& path, const VerifyOptions& options) {
  ParseResult parsed;
  try {
    parsed = parse_plan_file(path);
  } catch (const std::exception& e) {
    parsed.io_error = std::string("unexpected error while reading the plan: ") + e.what();
  }
  if (parsed.plan) {
    Report report = verify_plan(*parsed.plan, options);
    report.plan_path = path;
    return report;
  }
  Report report;
  report.plan_path = path;
  if (parsed.error) {
    report.verdict = Verdict::Invalid;
    report.invalid = parsed.error;
  } else {
    report.verdict = Verdict::InternalError;
    report.error = parsed.io_error.empty() ? "the plan could not be read" : parsed.io_error;
  }
  return report;
}

}  // namespace shardproof
