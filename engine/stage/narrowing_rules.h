// How one op computes a box of its output from boxes of its operands, for
// narrowed stages (narrowed_stage.h). Only ops whose values at a position
// depend on their operands' values alone, never on sizes outside the box,
// are narrowed (iota's values along its dim and random's draws depend on the
// position, which their rewritten attributes keep); every other op computes
// its whole output from whole operands, which is always the op itself.
#pragma once

#include <string>
#include <vector>

#include "engine/core/attr.h"
#include "engine/core/ir.h"
#include "engine/ops/op_def.h"

namespace shardproof {

struct NarrowedOp {
  std::string op;              // the operator to run (all_gather runs as the concat it is)
  AttrMap attrs;               // its attributes for these boxes
  std::vector<SliceSpec> out;  // the box each output computes (the demand, widened)
  std::vector<SliceSpec> in;   // the box each operand must hold (an empty box: not read)
  // Written once per output, each computing that output alone (an
  // all_gather's outputs are equal, each the concat of the inputs).
  bool per_output = false;
};

// `demand` is the hull of what is demanded of the op's outputs (all outputs
// of a multi-output op share one shape, except split's, which differ only
// along its split dim, kept whole).
// The narrowed op is checked by the operator's own shape rule: an output
// shape other than its box falls back to the whole op.
NarrowedOp narrow_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorInfo>& in,
                     const std::vector<TensorInfo>& out, const SliceSpec& demand);

}  // namespace shardproof
