#include "daemon/plan_memos.h"

#include <algorithm>

namespace shardproof::daemon {

std::unique_ptr<PlanMemo> PlanMemos::take(const std::string& path) {
  std::unique_ptr<PlanMemo> memo;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(memos_.begin(), memos_.end(),
                           [&](const auto& entry) { return entry.first == path; });
    // Else the most recent one: an edit is recognised by its bytes, whatever
    // the file is called (the pre-commit hook verifies staged copies under
    // temporary paths).
    if (it == memos_.end() && !memos_.empty()) it = memos_.begin();
    if (it != memos_.end()) {
      memo = std::move(it->second);
      memos_.erase(it);
    }
  }
  return memo ? std::move(memo) : std::make_unique<PlanMemo>();
}

void PlanMemos::give_back(const std::string& path, std::unique_ptr<PlanMemo> memo) {
  if (capacity_ == 0 || !memo || !memo->parsed) return;
  std::list<std::pair<std::string, std::unique_ptr<PlanMemo>>> dropped;  // freed unlocked
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(memos_.begin(), memos_.end(),
                           [&](const auto& entry) { return entry.first == path; });
    if (it != memos_.end()) dropped.splice(dropped.end(), memos_, it);
    memos_.emplace_front(path, std::move(memo));
    while (memos_.size() > capacity_)
      dropped.splice(dropped.end(), memos_, std::prev(memos_.end()));
  }
}

size_t PlanMemos::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memos_.size();
}

}  // namespace shardproof::daemon
