// Claim proposals for input-free tensors (claim inference, docs/soundness.md
// 2.3): tensors whose values follow from the plan's constants and positions
// alone (const and iota, and what ops make of them: a causal mask built from
// two iotas), never from an input.
//
// Such a tensor has one set of values, whatever the inputs, so it is
// evaluated on its own, at full size, even in a plan too large to evaluate
// whole; and a parallel one that equals a logical one there equals it always
// (its claim's stage still proves it, by one exact evaluation:
// prove/input_free_stage.h). A mask computed from inputs is never matched
// this way: it can equal a logical mask by coincidence. Claiming a mask cuts
// the integer positions out of the stages that read it: a masked_fill then
// reads a claimed mask, on lines that no comparison of positions names, and
// shape reduction may shrink them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/ir.h"
#include "engine/infer/claim_inference.h"

namespace shardproof::infer {

// By tensor index: 1 when no graph input reaches the tensor.
std::vector<char> input_free_tensors(const Graph& g);

// For each unclaimed input-free boolean parallel intermediate (that is not
// one value throughout), every input-free logical block it equals exactly;
// by parallel tensor. Tensors over `max_tensor_elements` are not evaluated
// (nor what reads them); the blocks matched against take at most
// `index_budget` elements.
std::vector<std::vector<InferredClaim>> input_free_candidates(const Plan& plan,
                                                              int64_t max_tensor_elements,
                                                              int64_t index_budget);

}  // namespace shardproof::infer
