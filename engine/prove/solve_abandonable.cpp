#include "engine/prove/solve_abandonable.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/prove/bounded_check.h"

namespace shardproof {
namespace {

// What the solving thread owns (with the caller, until the caller leaves).
struct Job {
  Job(const Stage& s, const ProverOptions& o, StageSolve f)
      : stage(s), options(o), solve(std::move(f)) {}
  const Stage stage;
  const ProverOptions options;
  const StageSolve solve;
  std::mutex mutex;
  std::condition_variable changed;
  std::optional<StageOutcome> outcome;
  bool overrun = false;
};

}  // namespace

// A whole query's budget past the check's own deadline: a short check (the
// whole claim's first try gets 1/32) that Z3 stops late but within that
// still hands on to the rest of the stage; a second at least, for an
// interrupted check to unwind.
unsigned abandon_after_ms(const ProverOptions& options) {
  return std::max(options.timeout_ms, 1'000u);
}

std::optional<StageOutcome> solve_abandonable(const Stage& stage, const ProverOptions& options,
                                              StageSolve solve) {
  if (options.timeout_ms == 0) return solve(stage, options);
  auto job = std::make_shared<Job>(stage, options, std::move(solve));
  std::thread([job] {
    set_overrun_handler(
        [job] {
          std::lock_guard<std::mutex> lock(job->mutex);
          job->overrun = true;
          job->changed.notify_all();
        },
        abandon_after_ms(job->options));
    StageOutcome outcome = job->solve(job->stage, job->options);
    set_overrun_handler(nullptr);  // the handler holds the job
    std::lock_guard<std::mutex> lock(job->mutex);
    job->outcome = std::move(outcome);
    job->changed.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(job->mutex);
  job->changed.wait(lock, [&] { return job->outcome || job->overrun; });
  if (job->outcome) return std::move(*job->outcome);
  return std::nullopt;
}

}  // namespace shardproof
