// Position-based form of a definite stage outcome (proven, or refuted with its
// findings): every name is replaced by its position in the stage, so an
// outcome solved for one stage renders with the right names for any stage
// that shares its key (another identical layer, another plan). The cache
// stores this form; the verifier and the daemon use it to share outcomes.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "engine/prove/stage_prover.h"
#include "engine/stage/stage.h"

namespace shardproof {

// Part of every encoding: bytes of another version never decode. Bump it
// (or kEngineVersion) whenever the form below changes.
constexpr int kOutcomeCodecVersion = 3;  // 2: a finding's also_failing; 3: full_size tables

// nullopt when the outcome is not definite (unknown, internal error) or a
// finding cannot be written without names (a name that two stage tensors
// share, a message that quotes a name in an unexpected place): such an
// outcome is simply not shared. A result is guaranteed to decode back, for
// this stage, to exactly `outcome`.
std::optional<std::string> encode_outcome(const Stage& stage, const StageOutcome& outcome);

// The outcome for `stage` (its names, its stage id); nullopt when the bytes
// are not a valid encoding or do not fit the stage.
std::optional<StageOutcome> decode_outcome(const Stage& stage, const std::string& bytes);
// The same, with the stage asked for only when the outcome has findings (a
// proven outcome needs none: the verifier then need not build the stage).
std::optional<StageOutcome> decode_outcome(const std::function<const Stage&()>& stage,
                                           const std::string& bytes);

}  // namespace shardproof
