// The daemon's solver threads: a fixed pool that runs stage proofs for every
// request, so concurrent clients share the cores instead of each spawning
// its own threads, and no proof ever runs on libuv's loop thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace shardproof::daemon {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);  // 0: one per core
  ~WorkerPool();                     // finishes queued work, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs `task` on a pool thread and waits for its result.
  template <class T>
  T run(const std::function<T()>& task) {
    std::packaged_task<T()> job(task);
    std::future<T> result = job.get_future();
    submit([&job] { job(); });
    return result.get();
  }

  int size() const { return static_cast<int>(threads_.size()); }
  int busy() const;

 private:
  void submit(std::function<void()> job);
  void loop();

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  int busy_ = 0;
  bool stopping_ = false;
};

}  // namespace shardproof::daemon
