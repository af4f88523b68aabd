// A stage that reads no input (no free tensor: its values follow from
// constants and positions alone, such as a claimed causal mask built from
// two iotas, input_free.h) has one set of values, so one exact evaluation at
// full size decides it: agreeing everywhere is a proof, a difference is a
// counterexample at full size (docs/soundness.md, 2.3). Shape reduction
// keeps such a stage's position lines whole, so at production sizes it is
// too large for the solver; this is how it is decided there.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/prove/stage_prover.h"
#include "engine/stage/stage.h"

namespace shardproof {

// Proven or refuted by evaluating `full` (unreduced) exactly, or nullopt:
// it reads an input, holds more than `max_elements`, applies an
// uninterpreted function (one interpretation proves nothing about the
// others), or leaves the plan's domain (a zero denominator, a bad index).
std::optional<StageOutcome> decide_input_free(const Stage& full, int64_t max_elements);

}  // namespace shardproof
