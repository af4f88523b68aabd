// Counterexamples as users see them: the stage's free inputs (and part
// values) at reduced size, and the differing elements at full-size indices.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/stage/stage_claims.h"

namespace shardproof {

// Full-size index in the claimed logical tensor of element `element` of the
// stage's (reduced) claimed slice.
std::vector<int64_t> full_index(const Stage& stage, int64_t element);

// {"inputs", "parts", "differences"}; `differing` indexes claim.checks.
nlohmann::json counterexample_json(const Stage& stage, const StageValues<ConcreteAlgebra>& values,
                                   const ClaimChecks<Rational>& claim,
                                   const std::vector<int64_t>& differing);

}  // namespace shardproof
