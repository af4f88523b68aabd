// A stage's identity: the keys its verdict is stored and shared under.
#pragma once

#include <string>

#include "engine/stage/stage.h"

namespace shardproof {

// What a stored verdict is filed under: the stage key (canonical bytes and
// every version the verdict depends on) and an independent digest of the
// canonical bytes, stored next to the verdict and compared before a hit is
// trusted (a key collision or a damaged record must never pass as a proof).
struct StageIdentity {
  std::string key;      // stage_key(): 32 hex digits
  std::string digest;   // XXH3-128 of the canonical bytes under another seed: 32 hex digits
  std::string verdict;  // verdict_key(): the same for stages that differ only in full sizes
};

StageIdentity stage_identity(const Stage& stage);

}  // namespace shardproof
