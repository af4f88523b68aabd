// Sharded fuzz plans (docs/soundness.md, section 8): a random logical graph
// and a parallel version of it over 2 or 3 ranks, with shards along an axis,
// partial sums combined by all_reduce / all_gather / reduce_scatter, and
// integer positions (a vocabulary-parallel embedding, one-hot or gather),
// with or without one injected fault (sharded_plans.cpp).
#pragma once

#include "tests/fuzz/fuzz_plan.h"

namespace shardproof::fuzz {

// The faults a sharded plan may carry.
enum class Fault {
  None,
  ShardOffset,       // a rank slices, offsets or masks at another rank's offset
  ShardOrder,        // a gathering collective's group out of rank order
  MissingReduction,  // a partial sum claimed as the whole, no collective
  DoubledReduction,  // the partial sums reduced twice
  WrongScale,        // a mean divided by the local count, a bias added to every part
  MissingMask,       // a vocabulary shard's rows read for ids outside it
};
const char* fault_name(Fault f);

FuzzPlan sharded_plan(Random& random);

}  // namespace shardproof::fuzz
