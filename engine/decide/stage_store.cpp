#include "engine/decide/stage_store.h"

namespace shardproof {

std::optional<std::string> MemoryVerdictStore::lookup(const StageIdentity& id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = outcomes_.find(id.key);
    if (it != outcomes_.end()) return it->second;
  }
  // A miss here owes the backing store its finish(): ours forwards it.
  return backing_ ? backing_->lookup(id) : std::nullopt;
}

void MemoryVerdictStore::finish(const StageIdentity& id, const std::optional<std::string>& outcome,
                                double solve_seconds) {
  if (outcome) {
    std::lock_guard<std::mutex> lock(mutex_);
    outcomes_.emplace(id.key, *outcome);
  }
  if (backing_) backing_->finish(id, outcome, solve_seconds);
}

bool MemoryVerdictStore::decided_in_this_run(const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return outcomes_.count(id.key) > 0;
}

void MemoryVerdictStore::mark_shared_proof(const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  shared_.insert(id.key);
}

bool MemoryVerdictStore::shared_proof_in_this_run(const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_.count(id.key) > 0;
}

}  // namespace shardproof
