// Demanded regions: which part of each logical tensor a stage's claimed
// region depends on. A stage's logical cone keeps only the ops whose outputs
// are demanded; a tensor read by a kept op but demanded nowhere becomes a
// free leaf of the stage, which is sound because (by these conservative
// index maps) its values cannot reach the claimed region. Without this, a
// claim on one half of a concat drags in the whole cone of the other half.
#pragma once

#include <vector>

#include "engine/ir.h"

namespace shardproof {

// `cone` is a backward cone of `target` in `graph` (op indices, producers
// first). Returns the subset whose outputs intersect the demand that
// `region` of `target` places on them, in the same order.
std::vector<int> demanded_ops(const Graph& graph, const std::vector<int>& cone, int target,
                              const SliceSpec& region);
// The same from several demanded regions at once (`cone` reaches them all).
std::vector<int> demanded_ops(const Graph& graph, const std::vector<int>& cone,
                              const std::vector<std::pair<int, SliceSpec>>& seeds);

// The demand that `region` of the (one) output of op `op` places on its
// operand `k`.
SliceSpec operand_demand(const Graph& graph, int op, size_t k, const SliceSpec& region);

}  // namespace shardproof
