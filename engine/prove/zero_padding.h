// Zero-padded witnesses (docs/soundness.md, section 5.1): a refutation at
// reduced size confirmed at full size without evaluating the full stage.
//
// Lift a reduced input to full size with zeros: each reduced element at the
// full position it stands for (Stage::full_position, the kept positions),
// every other real element 0 (lifted_values.h, the zero fill). For many
// stages the full stage then holds, at every kept position, exactly the
// reduced stage's value: a sum over a line adds only zeros besides what it
// added at reduced size, a product or square of zeros is zero, data moves
// kept positions onto kept positions. When that holds for every op, a claim
// that fails at a reduced element fails at its full position on that full
// input: a full-size witness, even for a stage of billions of elements (a
// gradient clip's global sum of squares).
//
// The check is per op, over the reduced stage: each tensor and dim carries
// "zero off the kept positions of this dim"; an op that combines along a
// reduced line needs that of its operand, an op outside the rules below
// needs every line it touches kept whole, and a denominator must be kept
// whole (no zero may reach it).
#pragma once

#include <string>
#include <vector>

#include "engine/stage/stage.h"

namespace shardproof {

struct ZeroPadding {
  // Per tensor and dim: the tensor is 0 wherever that dim's coordinate is
  // not a kept position (always true for a dim kept whole). Empty when
  // refused.
  std::vector<std::vector<char>> zero;
  // Empty when every kept position holds the reduced value; otherwise the
  // first op (or tensor) that may not, and why.
  std::string refusal;
};

// `reduced` is `full` after shape reduction (the same ops in the same
// order).
ZeroPadding zero_padding(const Stage& full, const Stage& reduced);

}  // namespace shardproof
