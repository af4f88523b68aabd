// Both graphs of a plan evaluated on one random assignment, modulo a prime
// (ops/modular_algebra.h): the numbers claim inference matches.
//
// Logical inputs get random residues (integer inputs random integers below
// `int_bound`, boolean inputs random bits); each parallel input takes its
// value from its claim, so the two graphs see the same data: a slice is the
// logical values there, a scaled claim those times its factor, and the k
// parts of a part set are random except the last, which completes the sum.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/tensor.h"

namespace shardproof::infer {

using Residues = Tensor<uint64_t>;

struct PlanValues {
  std::vector<std::optional<Residues>> logical, parallel;  // per tensor index
};

// Throws EvalError when the values leave the plan's domain (an index out of
// range: `int_bound` too large for some integer input; a division by zero).
// `mirrored`: the same values under the mirrored order (modular_algebra.h).
PlanValues evaluate_plan(const Plan& plan, uint64_t seed, int64_t int_bound, bool mirrored = false);

}  // namespace shardproof::infer
