// Runs body(0..n-1) on up to `jobs` threads (0: one per core), the calling
// thread included. Items are handed out one at a time, so uneven items
// (a large stage next to small ones) balance themselves.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace shardproof {

inline int worker_count(int requested, size_t work) {
  int n = requested > 0 ? requested : static_cast<int>(std::thread::hardware_concurrency());
  if (n < 1) n = 1;
  return static_cast<int>(std::min<size_t>(n, std::max<size_t>(work, 1)));
}

inline void parallel_for(int jobs, size_t n, const std::function<void(size_t)>& body) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) body(i);
  };
  std::vector<std::thread> threads;
  const int count = worker_count(jobs, n);
  for (int i = 1; i < count; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
}

}  // namespace shardproof
