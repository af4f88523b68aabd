// The class verifier: verifies a compact plan (shardproof-plan/1.1) that is
// too large to expand, per coordinate class instead of per instance
// (docs/soundness.md, "Coordinate classes").
//
// Along each mesh axis (and the micro-batch axis) the coordinates fall into
// classes: the points where some condition of the plan changes (first, last,
// and each side of every constant a condition compares an axis with) and
// the runs between them. A *box* takes one class per axis. The verifier
// explores the plan only at the corners of every box (compact_explore.h),
// writes the part of the expansion those explorations need, and verifies it
// with the ordinary engine. A box is verified when all its corners made the
// same decisions and their stages have the same verdict keys: every
// quantity involved is affine in the coordinate, so it then keeps its sign
// (or value) over the whole box, and every instance inside has the stages
// its corners have. A box whose corners differ is split and explored again.
#pragma once

#include "engine/decide/plan_run.h"
#include "engine/report/report.h"

namespace shardproof {

// How a class run went, for tests and benchmarks: its batches (one per
// pipeline stage and round) and how many took the result of an earlier
// batch equal to them up to names (batch_reuse.h) instead of being verified.
struct ClassRunCounts {
  int64_t batches = 0, reused = 0;
};

// `plan.compact` must be set. Never throws. Fills `counts` if not null.
Report verify_by_classes(const Plan& plan, const VerifyOptions& options,
                         ClassRunCounts* counts = nullptr);

}  // namespace shardproof
