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

namespace {

// The thread that solves this thread's stages, one at a time, kept from one
// stage to the next so that its Z3 context is too (thread_context.h). A
// worker whose job overran is let go: it ends after that job.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // `job`'s outcome, or nullopt when one of its checks overran; then this
  // worker is busy for good and must be let go.
  std::optional<StageOutcome> run(const std::shared_ptr<Job>& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = job;
    }
    wake_.notify_all();
    std::unique_lock<std::mutex> lock(job->mutex);
    job->changed.wait(lock, [&] { return job->outcome || job->overrun; });
    if (job->outcome) return std::move(*job->outcome);
    return std::nullopt;
  }

  // After an overrun: the thread finishes its job alone and ends. This
  // object must outlive it, so the caller leaks it.
  void let_go() {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    thread_.detach();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || job_; });
        if (!job_) return;  // stopped between jobs
        job = std::move(job_);
      }
      solve_job(job);
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_) return;  // let go
    }
  }

  static void solve_job(const std::shared_ptr<Job>& job) {
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
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::shared_ptr<Job> job_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest is made
};

}  // namespace

std::optional<StageOutcome> solve_abandonable(const Stage& stage, const ProverOptions& options,
                                              StageSolve solve) {
  if (options.timeout_ms == 0) return solve(stage, options);
  thread_local std::unique_ptr<Worker> worker;
  if (!worker) worker = std::make_unique<Worker>();
  auto job = std::make_shared<Job>(stage, options, std::move(solve));
  std::optional<StageOutcome> outcome = worker->run(job);
  if (!outcome) {
    worker->let_go();
    (void)worker.release();  // the detached thread still uses it
  }
  return outcome;
}

}  // namespace shardproof
