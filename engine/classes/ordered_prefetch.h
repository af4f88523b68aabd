// Results made on worker threads and handed out in order: the class
// verifier prepares the next pipeline stages' batches (explore, write, read,
// cut) while it verifies the current one, so both cores work.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace shardproof {

// make(i) for i = 0..n-1 on `workers` threads (none: take() makes it), at
// most `ahead` started past the last taken one, so that memory holds a few
// results, not all n. take() must be called for 0, 1, 2, ... in order.
template <class T>
class OrderedPrefetch {
 public:
  OrderedPrefetch(size_t n, int workers, size_t ahead, std::function<T(size_t)> make)
      : make_(std::move(make)), results_(n), errors_(n), ahead_(ahead < 1 ? 1 : ahead) {
    for (int w = 0; w < workers && static_cast<size_t>(w) < n; ++w)
      threads_.emplace_back([this] { work(); });
  }
  ~OrderedPrefetch() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  OrderedPrefetch(const OrderedPrefetch&) = delete;
  OrderedPrefetch& operator=(const OrderedPrefetch&) = delete;

  // Result i (waits for it); rethrows what make(i) threw.
  T take(size_t i) {
    if (threads_.empty()) return make_(i);
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return results_[i].has_value() || errors_[i]; });
    taken_ = i + 1;
    changed_.notify_all();
    if (errors_[i]) std::rethrow_exception(errors_[i]);
    T out = std::move(*results_[i]);
    results_[i].reset();
    return out;
  }

 private:
  void work() {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock,
                      [&] { return stop_ || next_ >= results_.size() || next_ < taken_ + ahead_; });
        if (stop_ || next_ >= results_.size()) return;
        i = next_++;
      }
      std::optional<T> made;
      std::exception_ptr error;
      try {
        made.emplace(make_(i));
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (error)
          errors_[i] = error;
        else
          results_[i] = std::move(made);
      }
      changed_.notify_all();
    }
  }

  std::function<T(size_t)> make_;
  std::vector<std::optional<T>> results_;
  std::vector<std::exception_ptr> errors_;
  size_t ahead_, next_ = 0, taken_ = 0;
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> threads_;
};

}  // namespace shardproof
