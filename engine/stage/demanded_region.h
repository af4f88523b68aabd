// Demanded regions: which part of each logical tensor a stage's claimed
// region depends on. A stage's logical cone holds only the ops whose outputs
// are demanded; a tensor read by a kept op but demanded nowhere becomes a
// free leaf of the stage, which is sound because (by these conservative
// index maps) its values cannot reach the claimed region. Without this, a
// claim on one half of a concat drags in the whole cone of the other half.
#pragma once

#include <functional>
#include <vector>

#include "engine/core/contraction.h"
#include "engine/core/ir.h"

namespace shardproof {

// The ops (producers first) whose outputs intersect the demand that the
// regions `seeds` place on them, walking back from the seeds and stopping at
// tensors for which `stop` holds (never at a seed). An empty region is the
// whole tensor. Branches nothing is demanded of are not walked: a claim on
// one half of a concat would otherwise walk the whole model behind the
// other half.
std::vector<int> demanded_cone(const Graph& graph,
                               const std::vector<std::pair<int, SliceSpec>>& seeds,
                               const std::function<bool(int)>& stop);

// The demand that `region` of the (one) output of op `op` places on its
// operand `k`.
SliceSpec operand_demand(const Graph& graph, int op, size_t k, const SliceSpec& region);
// The same from the operator, its attributes and its operands' shapes (a
// stage's op, which has no graph). Not for split (its outputs differ).
SliceSpec operand_demand(const std::string& op, const AttrMap& attrs, const std::vector<Shape>& in,
                         const std::vector<Shape>& out, size_t k, const SliceSpec& region);

// How logical tensor `t`'s producer contracts (checked by the parser for
// every restricted claim; throws std::logic_error otherwise).
Contraction contraction_producing(const Graph& log, int t);

}  // namespace shardproof
