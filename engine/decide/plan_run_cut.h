// Verifying an expanded plan whose stage units were cut before: the class
// verifier cuts each batch itself, to compare it with the batches it has
// verified (engine/classes/batch_reuse.h), and verifies it only if none is
// the same.
#pragma once

#include <vector>

#include "engine/decide/plan_run.h"

namespace shardproof {

// verify_expanded with the plan's stage units cut before (cut_units(plan));
// the report's cut phase is `cut_seconds`.
Report verify_expanded_cut(const Plan& plan, std::vector<StageUnit> units, double cut_seconds,
                           const VerifyOptions& options, StageRecord* record);

}  // namespace shardproof
