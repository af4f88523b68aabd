// Choosing among value matches by the cut they make (claim inference).
//
// A parallel tensor's values often equal several logical blocks: a
// recomputation in the backward pass (layer norm's x - mean, attention
// scores) repeats a forward tensor's values exactly. Values cannot tell them
// apart, but the cut can: a claim makes a stage whose logical cone runs from
// the claimed tensor back to the logical tensors the stage's parallel inputs
// claim. Claiming the forward tensor gives a cone of one op; claiming its
// backward twin, which no parallel input leads to, gives a cone back to the
// logical inputs: a whole forward pass in one stage.
//
// So the candidates are chosen in the parallel graph's topological order,
// each tensor taking the candidate whose logical cone from the tensor's cut
// frontier (the logical tensors its nearest claimed parallel ancestors claim)
// is smallest. This only chooses where the plan is cut; every choice is
// still proven or withdrawn (hinted_verify.h).
#pragma once

#include <vector>

#include "engine/core/ir.h"
#include "engine/infer/claim_inference.h"

namespace shardproof::infer {

// One claim per tensor that has candidates: `candidates[t]` holds tensor
// t's value matches (any order). The result is sorted by parallel tensor.
std::vector<InferredClaim> choose_claims(const Plan& plan,
                                         std::vector<std::vector<InferredClaim>> candidates);

}  // namespace shardproof::infer
