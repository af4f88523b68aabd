// The full (pre-reduction) sizes an operator's semantics read (a mean's
// divisor: the full count of its reduced dims). What was proved of a reduced
// stage depends on these and on no other full size, so a stage's proof key
// carries exactly them (docs/soundness.md, "One proof per reduced query"),
// and the evaluators pass no other: full_count (op_helpers.h) throws on a
// size withheld here, so an operator that starts reading one must be listed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/attr.h"
#include "engine/core/tensor.h"

namespace shardproof {

// A full size an operator does not read.
constexpr int64_t kUnreadFullSize = -1;

// Per input and dim of `op` (inputs' full shapes `full`), whether its
// semantics read that full size: mean (its reduced dims), layernorm and
// rmsnorm (the last dim of x). Every other operator reads none.
std::vector<std::vector<bool>> full_dims_read(const std::string& op, const AttrMap& attrs,
                                              const std::vector<Shape>& full);

// `full` with every size `op` does not read replaced by kUnreadFullSize:
// what the evaluators pass as OpCall::full_in_shapes.
std::vector<Shape> declared_full_shapes(const std::string& op, const AttrMap& attrs,
                                        std::vector<Shape> full);

}  // namespace shardproof
