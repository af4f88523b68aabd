// Memo of stage identities by the stage as it was cut, before reduction.
//
// Shape reduction and the canonical form are a deterministic function of the
// unreduced stage's canonical bytes (reduction reads no names, no source
// indices and no rank numbers: only what canonical_bytes writes). So two
// stages with the same unreduced bytes reduce to the same stage and share its
// identity; the memo skips reducing and keying all but the first. Within a
// run this serves identical layers; a daemon keeps one across runs, so a plan
// re-verified after a small change reduces only the stages that changed.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "engine/stage/stage.h"
#include "engine/stage/stage_identity.h"

namespace shardproof {

// XXH3-128 of the unreduced stage's canonical bytes and every version its
// reduction and key depend on.
using RawStageKey = std::array<uint64_t, 2>;
RawStageKey raw_stage_key(const Stage& unreduced);

struct RawStageKeyHash {
  size_t operator()(const RawStageKey& k) const { return static_cast<size_t>(k[0] ^ k[1]); }
};

// Thread-safe; bounded: past `capacity` entries it starts again empty (a
// memo forgets, it is never wrong).
class StageIdentityMemo {
 public:
  explicit StageIdentityMemo(size_t capacity = 1'000'000) : capacity_(capacity) {}
  std::optional<StageIdentity> find(const RawStageKey& key) const;
  void remember(const RawStageKey& key, const StageIdentity& id);
  size_t size() const;

 private:
  size_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<RawStageKey, StageIdentity, RawStageKeyHash> map_;
};

}  // namespace shardproof
