// Verdicts of a reduced stage checked against the stage at full size
// (docs/soundness.md, section 5.1). Shape reduction is an argument with
// assumptions; these checks make a mistake in it show instead of pass:
// - a proof is backed by random values at full size (a small stage), or at
//   a second, larger reduction (pieces of 3): a disagreement is reported
//   *unknown* with a loud diagnostic, never equivalent;
// - a refutation needs a full-size witness: random values at full size, or
//   a proof of the full stage, else it is *unknown* (a counterexample that
//   exists only at reduced size must not block a commit). In a stage too
//   large to test whole, the failing elements are replayed at full size on
//   the sub-stage they need (full_size_witness.h); without a witness the
//   stage is proven again at pieces of 3, and is unknown unless that
//   refutation is witnessed.
#pragma once

#include <cstdint>

#include "engine/prove/full_size_witness.h"
#include "engine/prove/stage_prover.h"
#include "engine/stage/stage.h"

namespace shardproof {

struct FullSizeBudget {
  int64_t test_elements = 20'000;   // full stages tested on random values
  int64_t solve_elements = 20'000;  // full stages re-proven when testing finds no witness
  int64_t second_piece = 3;         // the backstop's second reduction
  WitnessBudget witness;            // larger refuted stages: the narrowed witness
  // A stage too large to prove: elements tested at full size on their
  // sub-stages (smaller and fewer trials: most such stages are correct).
  WitnessBudget probe{1'000'000, 8, 4};
};

// `reduced` (already reduced) was decided as `outcome`; `full` is the same
// stage as cut, unreduced. Returns the outcome to report.
StageOutcome check_at_full_size(const Stage& full, const Stage& reduced, StageOutcome outcome,
                                const ProverOptions& options, const FullSizeBudget& budget = {});

}  // namespace shardproof
