// Claim inference: proposes lineage claims for the parallel graph's unclaimed
// intermediate tensors by matching values (docs/soundness.md, "Inferred
// claims").
//
// Both graphs are evaluated on one random assignment modulo a prime
// (plan_values.h). A parallel tensor whose values are c times a block of a
// logical tensor's values (the logical dims cut into equal blocks of the
// parallel tensor's shape; c a small nonzero rational) gets the claim
// {tensor, slice: that block, scale: c}. Random values make a coincidental
// match improbable, except where a comparison decides (one bit: a clipping
// coefficient min(c / norm, 1) saturates at 1 for one order of a random
// norm in two), so a match must hold again on the same values under the
// mirrored order (ops/modular_algebra.h), where such a comparison of the same
// values comes out the other way. Nothing here is trusted either: every
// proposed claim is an ordinary claim that its own stage must prove
// (hinted_verify.h), and a claim that does not prove is withdrawn.
// Proposals only choose where the plan is cut; they never decide a verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/ir.h"

namespace shardproof::infer {

struct InferredClaim {
  int parallel = -1;  // parallel tensor index
  Lineage of;         // logical index and name, slice, scale filled
};

struct InferenceLimits {
  // Element operations each of the two evaluations (the order and the
  // mirrored one) and the index may cost; a larger plan is evaluated by
  // stages at reduced size (reduced_inference.h).
  int64_t max_elements = 60'000'000;
  // What indexing the blocks of a plan evaluated whole may cost, in elements
  // read (a hash each) plus `index_block_cost` per block kept: an attention's
  // scores are indexed once per parallel shape that divides them, which
  // `max_elements` alone made too much at batch 8, sequence 64 (the step
  // was then cut only at its parameters and every gradient stage held it).
  int64_t max_index_cost = 200'000'000;
  int64_t index_block_cost = 64;
  uint64_t seed = 0x5eed;
};

struct InferenceResult {
  std::vector<InferredClaim> claims;
  std::string skipped;  // why nothing was proposed ("" when it ran)
};

InferenceResult infer_claims(const Plan& plan, const InferenceLimits& limits = {});

// `plan` with `claims` added to its parallel tensors' declarations.
Plan with_claims(const Plan& plan, const std::vector<InferredClaim>& claims);

}  // namespace shardproof::infer
