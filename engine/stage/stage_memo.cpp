#include "engine/stage/stage_memo.h"

#include <xxhash.h>

#include "engine/ops/op_registry.h"
#include "engine/stage/canonical.h"

namespace shardproof {

RawStageKey raw_stage_key(const Stage& unreduced) {
  std::string bytes = canonical_bytes(unreduced);
  // The reduction's own version rides on the engine version.
  bytes += "|unreduced|engine=" + std::to_string(kEngineVersion);
  bytes += "|semantics=" + std::to_string(OpRegistry::kSemanticsVersion);
  XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return {h.high64, h.low64};
}

std::optional<StageIdentity> StageIdentityMemo::find(const RawStageKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = map_.find(key);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void StageIdentityMemo::remember(const RawStageKey& key, const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (map_.size() >= capacity_) map_.clear();
  map_.emplace(key, id);
}

size_t StageIdentityMemo::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return map_.size();
}

}  // namespace shardproof
