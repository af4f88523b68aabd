#include "engine/verifier.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "engine/canonical.h"
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
      case StageStatus::Proven:
        break;
      case StageStatus::Refuted:
        refuted = true;
        break;
      case StageStatus::Unknown:
        unknown = true;
        break;
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

// Runs body(0..n-1) on up to `jobs` threads (0: all cores).
void parallel_for(int jobs, size_t n, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) body(i);
  };
  std::vector<std::thread> threads;
  int count = worker_count(jobs, n);
  for (int i = 1; i < count; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

}  // namespace

Report verify_plan(const Plan& plan, const VerifyOptions& options) {
  auto start = Clock::now();
  Report report;
  report.plan_path = plan.path;
  report.plan_name = plan.name;
  report.meta =
      nlohmann::json::parse(plan.meta_json.empty() ? "{}" : plan.meta_json, nullptr, false);
  if (report.meta.is_discarded()) report.meta = nlohmann::json::object();
  report.stats.logical_ops = static_cast<int64_t>(plan.logical.ops.size());
  report.stats.parallel_ops = static_cast<int64_t>(plan.parallel.ops.size());
  try {
    std::vector<Stage> stages = build_stages(plan);
    report.stats.stages = static_cast<int64_t>(stages.size());
    std::vector<StageOutcome> outcomes(stages.size());
    std::vector<std::string> keys(stages.size());
    ProverOptions prover{options.rlimit, options.max_stage_elements, options.timeout_ms,
                         options.test_trials};
    std::atomic<int64_t> done{0};
    std::mutex progress_mutex;
    auto report_progress = [&] {
      int64_t finished = ++done;
      if (!options.progress) return;
      std::lock_guard<std::mutex> lock(progress_mutex);
      options.progress(finished, static_cast<int64_t>(stages.size()));
    };
    // Phase 1: reduce and key every stage.
    parallel_for(options.jobs, stages.size(), [&](size_t i) {
      if (options.reduce_shapes) reduce_stage(stages[i]);
      keys[i] = stage_key(stages[i]);
    });
    // Phase 2: solve one stage per distinct key (identical layers once).
    std::map<std::string, size_t> first_with_key;
    std::vector<size_t> unique, duplicates;
    for (size_t i = 0; i < stages.size(); ++i) {
      if (first_with_key.emplace(keys[i], i).second)
        unique.push_back(i);
      else
        duplicates.push_back(i);
    }
    report.stats.unique_stages = static_cast<int64_t>(unique.size());
    parallel_for(options.jobs, unique.size(), [&](size_t u) {
      outcomes[unique[u]] = prove_stage(stages[unique[u]], prover);
      report_progress();
    });
    // Phase 3: a duplicate of a proven stage is proven; any other duplicate
    // is solved on its own so its findings name its own tensors.
    std::vector<size_t> resolve;
    for (size_t i : duplicates) {
      const StageOutcome& first = outcomes[first_with_key[keys[i]]];
      if (first.status == StageStatus::Proven) {
        outcomes[i].status = StageStatus::Proven;
        report_progress();
      } else {
        resolve.push_back(i);
      }
    }
    parallel_for(options.jobs, resolve.size(), [&](size_t r) {
      outcomes[resolve[r]] = prove_stage(stages[resolve[r]], prover);
      report_progress();
    });
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
