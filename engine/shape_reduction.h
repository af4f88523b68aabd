// Shape reduction (design.md, "Shape reduction: what keeps it sound";
// argument in docs/soundness.md).
//
// Every axis of every stage tensor lies on a *line*: a coordinate axis
// shared by all axes that operators, lineage slices and collectives relate
// (the same positions, or a sub-range at an offset). The offsets of all those
// relations are the line's *boundaries*; a *piece* is the run between two
// boundaries. Reduction keeps every piece with at most 2 elements (pieces of
// 1 stay 1), so every boundary, every partition ratio and every part survives,
// and each piece still has two distinct elements to tell sum from mean, max
// from sum, or one order from another. Lines an operator marks frozen
// (integer positions, reshapes it cannot map, broadcast or constant axes),
// and lines whose relations contradict each other, keep their full size.
// A reduced stage is re-checked by the operators' own shape rules; if it does
// not check, the offending lines are frozen and reduction is retried, and in
// the end the stage keeps full sizes rather than risk an unsound reduction.
#pragma once

#include "engine/stage.h"

namespace shardproof {

// Rewrites `stage` to reduced sizes in place (shapes, lineage slices, op
// attributes, full_position map).
void reduce_stage(Stage& stage);

}  // namespace shardproof
