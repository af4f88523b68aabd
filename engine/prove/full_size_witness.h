// A full-size witness for a refutation found at reduced size, in a stage too
// large to test whole (docs/soundness.md, section 5.1): each failing element
// is lifted to its full-size position (findings already name full-size
// elements), the stage is narrowed to what that element needs
// (narrowed_stage.h) and run on random values at full size. Only a
// disagreement there is a witness: a difference that exists only at reduced
// size must not block a commit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

struct WitnessBudget {
  int64_t narrowed_elements = 4'000'000;  // elements of one narrowed sub-stage
  int elements_tried = 4;                 // failing elements narrowed, one at a time
  int trials = 12;  // random trials per sub-stage (a trial with a zero denominator is skipped)
};

// `reduced` is a mismatch finding of `full` (unreduced) at reduced size.
// Returns it with the elements that fail at full size and a note of the
// witness, or nullopt and why none was found.
std::optional<Finding> full_size_witness(const Stage& full, const Finding& reduced,
                                         const WitnessBudget& budget, std::string& why);

}  // namespace shardproof
