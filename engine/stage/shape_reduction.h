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
// from sum, or one order from another. A line whose positions integers
// name (token ids on a vocabulary, iota) keeps K + 2 per piece, K the
// integer elements that can name one, and every integer position on it is
// rewritten by the same map (docs/soundness.md, "Integer positions").
// Lines an operator marks frozen (reshapes it cannot map, broadcast and
// combined axes, integer uses no map preserves), and lines whose relations
// contradict each other, keep their full size.
// A reduced stage is re-checked by the operators' own shape rules; if it does
// not check, the offending lines are frozen and reduction is retried, and in
// the end the stage keeps full sizes rather than risk an unsound reduction.
#pragma once

#include "engine/stage/stage.h"

namespace shardproof {

// Rewrites `stage` to reduced sizes in place (shapes, lineage slices, op
// attributes and integer position constants, full_position and value_maps).
// `piece` is the elements a piece keeps (2; more for the backstop's second
// reduction, docs/soundness.md section 5).
void reduce_stage(Stage& stage, int64_t piece = 2);

// Shrinks `stage` for claim inference only (infer/reduced_inference.h): as
// reduce_stage, but without the rules that keep a proof sound at the cost
// of size: a line integers name keeps `piece` per piece (ids collide), a
// combined line whose summand may repeat values (value variation) is
// reduced, and a line relations contradict is laid out by its period
// instead of kept whole. Both graphs still see
// the same reduced data, so their values still match where the full-size
// ones do; what they propose is proven at full size or withdrawn. Never
// for a proof.
void reduce_stage_for_proposals(Stage& stage);

}  // namespace shardproof
