// One-rank fuzz plans: a random graph and its parallel copy (one_rank_plans.cpp).
#pragma once

#include "tests/fuzz/fuzz_plan.h"

namespace shardproof::fuzz {

FuzzPlan one_rank_plan(Random& random);

}  // namespace shardproof::fuzz
