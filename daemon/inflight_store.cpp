#include "daemon/inflight_store.h"

namespace shardproof::daemon {

std::optional<std::string> InflightStore::lookup(const StageIdentity& id) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = solving_.find(id.key);
    if (it == solving_.end()) break;
    std::shared_ptr<Solve> solve = it->second;
    finished_.wait(lock, [&] { return solve->done; });
    if (solve->outcome) {
      ++joined_;
      return solve->outcome;
    }
    // The other solve found nothing definite (say it hit its limits): this
    // caller may have other limits, so it tries itself, as the new owner.
  }
  // This caller owns the key until finish(). The store is asked only now:
  // an owner stores before it lets go, so a stored answer cannot be missed.
  solving_.emplace(id.key, std::make_shared<Solve>());
  lock.unlock();
  std::optional<std::string> stored = inner_ ? inner_->lookup(id) : std::nullopt;
  if (stored) {
    lock.lock();
    auto it = solving_.find(id.key);
    it->second->done = true;
    it->second->outcome = stored;
    solving_.erase(it);
    finished_.notify_all();
  }
  return stored;
}

void InflightStore::finish(const StageIdentity& id, const std::optional<std::string>& outcome,
                           double solve_seconds) {
  if (inner_) inner_->finish(id, outcome, solve_seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = solving_.find(id.key);
  if (it == solving_.end()) return;
  it->second->done = true;
  it->second->outcome = outcome;
  solving_.erase(it);
  finished_.notify_all();
}

int64_t InflightStore::joined() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return joined_;
}

int64_t InflightStore::in_flight() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(solving_.size());
}

}  // namespace shardproof::daemon
