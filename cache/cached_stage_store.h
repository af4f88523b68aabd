// The verdict cache seen by the engine: stage outcomes looked up and kept
// under their stage key, checked against their canonical digest.
#pragma once

#include "cache/verdict_cache.h"
#include "engine/decide/stage_store.h"

namespace shardproof::cache {

class CachedStageStore : public StageVerdictStore {
 public:
  explicit CachedStageStore(VerdictCache& cache) : cache_(cache) {}

  std::optional<std::string> lookup(const StageIdentity& id) override {
    return cache_.get(EntryKind::Stage, id.key, id.digest);
  }
  void finish(const StageIdentity& id, const std::optional<std::string>& outcome,
              double solve_seconds) override {
    if (outcome) cache_.put(EntryKind::Stage, id.key, id.digest, *outcome, solve_seconds);
  }

 private:
  VerdictCache& cache_;
};

}  // namespace shardproof::cache
