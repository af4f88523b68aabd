// Claim inference for plans too large to evaluate whole (a harness captured
// at production sizes): each stage of the plan as written is shrunk by shape
// reduction (stage/shape_reduction.h) and evaluated there, modulo a prime. A
// parallel tensor of a stage whose reduced values equal a block of a logical
// tensor's reduced values, on a block grid that its full shape makes too,
// gets that block at full size as a candidate. Reduction keeps every
// boundary of every line, so a block at reduced size is the block with the
// same grid coordinate at full size; a candidate is still only a proposal,
// proven or withdrawn like every other (hinted_verify.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/infer/claim_inference.h"

namespace shardproof::infer {

// Candidates per parallel tensor (choose_claims' input); `skipped` says why
// there are none when no stage could be evaluated.
std::vector<std::vector<InferredClaim>> reduced_candidates(const Plan& plan,
                                                           const InferenceLimits& limits,
                                                           std::string& skipped);

}  // namespace shardproof::infer
