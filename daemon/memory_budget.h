// The daemon's global memory budget: each verify reserves what its plan is
// estimated to cost before it is parsed, and waits while the reservations
// of running requests leave too little (so 16 clients sending large plans
// at once queue instead of exhausting the machine). A request larger than
// the whole budget runs alone.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

namespace shardproof::daemon {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t bytes) : total_(bytes) {}

  // The default: $SHARDPROOF_DAEMON_MEMORY ("8G"), else half of the RAM.
  static uint64_t default_bytes();

  // What verifying `text` may cost, from what it declares: the parsed v1
  // plan is a few tens of times its text; a compact plan expands up to the
  // engine's instance limit (compact_expand.h) whatever its text.
  static uint64_t estimate(const std::string& text);

  // Waits until `bytes` fit (or nothing else runs); false when `cancelled`
  // is set meanwhile (nothing reserved then).
  bool acquire(uint64_t bytes, const std::atomic<bool>* cancelled);
  void release(uint64_t bytes);

  uint64_t total() const { return total_; }
  uint64_t reserved() const;

 private:
  const uint64_t total_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  uint64_t reserved_ = 0;
  int holders_ = 0;
};

}  // namespace shardproof::daemon
