// What a proof of a reduced stage is shared under, across stages whose
// verdicts are not shared (docs/soundness.md, "One proof per reduced
// query"): the proof key (canonical.h) and an independent digest of the
// proof bytes, compared before a stored proof is trusted. It has the shape
// of a stage's identity, so a verdict store keeps proofs as it keeps stage
// outcomes (a proof key never equals a stage key: their bytes start apart).
#pragma once

#include "engine/stage/stage.h"
#include "engine/stage/stage_identity.h"

namespace shardproof {

// key: proof_key(); digest: XXH3-128 of proof_bytes() under the stage
// digest's seed; verdict: empty (a proof has no followers).
StageIdentity proof_identity(const Stage& stage);

}  // namespace shardproof
