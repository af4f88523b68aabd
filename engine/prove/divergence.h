// Where a refuted stage goes wrong: the parallel op at which the values
// leave the logical ones for good.
//
// A stage refuted by testing may run from a bug to the gradients: hundreds
// of ops, of which its claim's producer (a gradient all-reduce) is the
// last. On the failing trial's values, a parallel tensor *matches* when
// every value it holds (other than 0 and +-1) is a value of the logical
// side, or one times a claim scale of the stage (a data-parallel rank's
// gradient is dp x its slice). The ops that lead to the refuted claim
// through tensors that do not match form a region; its first op whose
// inputs all match is where the computation diverged: the bias added
// before the all-reduce, the partial gradient never summed. Partial sums
// that a later collective completes match again downstream, so they are
// not in the region. Only a pointer for the report: the verdict is the
// claim's.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/core/rational.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_eval.h"

namespace shardproof {

// The display name of the op where the parallel values first leave the
// logical ones on the way to `claim_tensors`; nullopt when none is found.
std::optional<std::string> divergence_op(const Stage& stage,
                                         const std::vector<std::optional<Tensor<Rational>>>& values,
                                         const std::vector<int>& claim_tensors);

}  // namespace shardproof
