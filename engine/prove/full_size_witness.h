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
#include <vector>

#include "engine/prove/lifted_values.h"
#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

struct WitnessBudget {
  int64_t narrowed_elements = 4'000'000;  // elements of one narrowed sub-stage
  int elements_tried = 4;                 // failing elements narrowed, one at a time
  int trials = 12;  // random trials per sub-stage (a trial with a zero denominator is skipped)
};

// `finding` is a mismatch finding of `full` (unreduced) at reduced size,
// `reduced` the stage it was found in and `values` (may be null) the values
// it was found with. Each sub-stage is replayed first on those values lifted
// to full size (lifted_values.h), then on random values. Returns the finding
// with the elements that fail at full size and a note of the witness, or
// nullopt and why none was found.
std::optional<Finding> full_size_witness(const Stage& full, const Stage& reduced,
                                         const Finding& finding, const ReducedValues* values,
                                         const WitnessBudget& budget, std::string& why);

// A stage too large to prove even after reduction: each of `elements` (full-size indices of the
// target) narrowed, and the sub-stage tested on random values at full size. A mismatch there is a
// finding with a full-size witness; nullopt (and why) otherwise.
std::optional<Finding> probe_at_full_size(const Stage& full,
                                          const std::vector<std::vector<int64_t>>& elements,
                                          const WitnessBudget& budget, std::string& why);

// `reduced` (a finding at reduced size) confirmed by `found`, a finding of a
// stage whose element e is element e + origin of the full stage's target
// slice (`size` elements: a narrowed sub-stage, or with `whole_stage` the
// full stage, whose values a zero-padded replay gives).
Finding witnessed_at_full_size(const Finding& reduced, const Finding& found,
                               const std::vector<int64_t>& origin, int64_t size,
                               bool whole_stage = false);

}  // namespace shardproof
