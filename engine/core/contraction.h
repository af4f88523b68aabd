// Contractions: ops whose every output element is a sum over an index box
// (matmul over k, sum over its reduced dims). A *restricted claim* (lineage
// "over", docs/plan-format.md) says a parallel tensor holds such an op's
// output with the sum limited to a sub-box: a partial sum that one rank or
// micro-batch computes. Over the reals these partial sums add up exactly to
// the whole when their boxes partition the index box.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/core/attr.h"
#include "engine/core/tensor.h"

namespace shardproof {

struct Contraction {
  // Per axis of the index box: the (operand, dim) pairs it runs along.
  std::vector<std::vector<std::pair<int, int>>> axes;
  Shape sizes;  // full length of each box axis
};

// How `op` with operands of `operand_shapes` contracts. Returns an error
// text (naming the op) when it is not a contraction a claim can restrict.
std::string contraction_of(const std::string& op, const AttrMap& attrs,
                           const std::vector<Shape>& operand_shapes, Contraction& out);

}  // namespace shardproof
