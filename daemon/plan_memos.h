// The daemon's memory of the last verification of each plan path it was sent
// (engine/plan_memo.h), so that an edit of that plan is re-read and
// re-decided only where it changed. A memo holds a parsed plan of up to
// hundreds of megabytes: only the most recently used few are kept.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "engine/plan_memo.h"

namespace shardproof::daemon {

class PlanMemos {
 public:
  explicit PlanMemos(size_t capacity) : capacity_(capacity) {}

  // The memo of `path`, else the most recently used one (the text decides
  // whether it is an edit of it), taken out while one request uses it (a
  // request meanwhile gets another or an empty one and reads in full).
  std::unique_ptr<PlanMemo> take(const std::string& path);
  // Puts a memo back as the most recently used, dropping the least recently
  // used beyond the capacity.
  void give_back(const std::string& path, std::unique_ptr<PlanMemo> memo);
  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::list<std::pair<std::string, std::unique_ptr<PlanMemo>>> memos_;  // most recent first
};

}  // namespace shardproof::daemon
