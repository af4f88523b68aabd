// Cut tensors that a stage defines instead of leaving free
// (docs/soundness.md §2, "A cut tensor the logical side does not read").
//
// A logical tensor T is cut because a parallel input of the stage claims
// it. When the stage's logical cone never reads T (its consumers read a
// value twin: the [2,4,2] view of a matmul where the claim names its
// [8,2] reshape), T stays a free variable on the parallel side alone while
// the logical side computes the same values from the cone: a false
// refutation. Such a T is defined by its producers when a short walk back
// from it ends at tensors the stage already holds: the solver then sees
// T = reshape(twin). A defined tensor takes its true logical value, so the
// stage proves a weaker statement than with T free, still one that holds of
// the real graph: the cut only ever chose which logical tensors are free.
// A cut T the cone does read (abs = maximum(x, neg x) with neg x cut) is
// defined the same way when its walk is position by position only (neg,
// scale, casts, transposes, ...): a reduction there (logits - max(logits))
// would tie the stage's lines together and keep them from shrinking. A walk
// may end at another cut tensor (a gradient t(t(mm)) with its twin mm cut).
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "engine/core/ir.h"

namespace shardproof {

// Ops a defining walk may add, per cut tensor; beyond it T stays free.
inline constexpr int kMaxDefiningOps = 16;

// The cut tensors of `cut` (in the order given) that a walk back
// through `log` defines: every tensor it reaches is produced by an op it
// adds (at most kMaxDefiningOps for each) or is held by the stage already
// (`held`: the tensors the logical cone reads or writes, its seeds'; a
// tensor defined before counts too). A walk that reaches a logical input
// the stage does not hold leaves its tensor free.
std::vector<int> defined_cut_tensors(const Graph& log, const std::vector<int>& unread,
                                     std::set<int> held);

}  // namespace shardproof
