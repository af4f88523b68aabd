// Which combined axes could count the elements of a piece (docs/soundness.md,
// "Values that count the piece"). Shape reduction keeps two elements of a
// piece; that is enough for a sum of terms that each depend on the element
// they sit at, not for a sum with a term that is the same at every element
// (a broadcast, a log-sum-exp, x - x, a comparison's indicator): that term
// is multiplied by the piece's length. Nor for a sum of bounded values
// (booleans, indicators), which a later minimum, maximum or comparison may
// saturate only at full size. This pass follows, per tensor axis, whether
// every term of a value depends on its position there, from the stage's
// inputs through every op, and names the combined axes where it may not:
// those lines keep their full size.
#pragma once

#include <utility>
#include <vector>

#include "engine/ops/op_def.h"
#include "engine/stage/stage.h"

namespace shardproof::reduction {

// What one op's relate_axes said, as operand slots (AxisRef numbering).
struct OpAxes {
  std::vector<std::pair<AxisRef, AxisRef>> pairs;  // same or sub_range
  std::vector<std::pair<AxisRef, std::vector<AxisRef>>> products;
  std::vector<AxisRef> combines;
};

// (stage tensor, dim) of every combined input axis whose summand may hold a
// term constant along it, or only bounded values. `axes` is per stage op.
std::vector<std::pair<int, int>> count_exposing_axes(const Stage& stage,
                                                     const std::vector<OpAxes>& axes);

}  // namespace shardproof::reduction
