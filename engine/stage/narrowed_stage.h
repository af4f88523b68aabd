// A full-size stage narrowed to what chosen elements of its claimed slice
// depend on (docs/soundness.md, section 5.1, "Findings need a full-size
// witness"). Demand is pushed back from those elements through the stage's
// ops and claims (the rules of demanded_region.h); every tensor keeps the box
// of positions something demanded reads (a logical free tensor, whose
// elements are independent leaves, one box per disjoint region read: a
// wrong offset reads two distant columns of one weight), and every op is
// rewritten to compute exactly its output's box from its operands' boxes. An
// op the rules cannot narrow computes its whole output from whole operands.
// So the narrowed stage holds, on each box, the values the full stage holds
// there: a claim that fails in it fails at full size, at the same element.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/stage/stage.h"

namespace shardproof {

struct NarrowedStage {
  Stage stage;  // unreduced: full_shape is the narrowed shape
  // Full-size position of the narrowed target's position 0, per dim: element
  // e of the narrowed target is element e + origin of the full one.
  std::vector<int64_t> origin;
  // Per narrowed tensor: the full stage's tensor it holds a box of, and the
  // box (full positions). A free tensor's element i is the full tensor's
  // element at the box's lo plus i (unflattened in the box's sizes).
  std::vector<int> source;
  std::vector<SliceSpec> box;
};

// `full` is an unreduced stage; `element` a full-size index of its target
// inside its claimed slice. nullopt (with `why`) when the narrowed stage
// would hold more than `max_elements` elements.
std::optional<NarrowedStage> narrow_stage(const Stage& full, const std::vector<int64_t>& element,
                                          int64_t max_elements, std::string& why);

}  // namespace shardproof
