#include "engine/decide/stage_store.h"

#include <utility>

namespace shardproof {

std::optional<std::string> MemoryVerdictStore::lookup(const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = outcomes_.find(id.key);
  if (it == outcomes_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

int64_t MemoryVerdictStore::take_hits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(hits_, 0);
}

void MemoryVerdictStore::finish(const StageIdentity& id, const std::optional<std::string>& outcome,
                                double) {
  if (!outcome) return;
  std::lock_guard<std::mutex> lock(mutex_);
  outcomes_.emplace(id.key, *outcome);
}

}  // namespace shardproof
