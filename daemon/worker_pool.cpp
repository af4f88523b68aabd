#include "daemon/worker_pool.h"

namespace shardproof::daemon {

WorkerPool::WorkerPool(int threads) {
  int n = threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return busy_;
}

void WorkerPool::submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void WorkerPool::loop() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      job = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    job();  // packaged_task: exceptions travel to the waiting caller
    std::lock_guard<std::mutex> lock(mutex_);
    --busy_;
  }
}

}  // namespace shardproof::daemon
