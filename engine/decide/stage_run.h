// Deciding the stages of one expanded plan (plan_run.h): each distinct stage
// once (from the store or the solver), then its duplicates from it, folded
// into the plan's Report.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/decide/plan_run.h"

namespace shardproof {

// What deciding a plan's stages leaves, per unit.
struct DecidedStages {
  std::vector<StageIdentity> identities;
  std::vector<StageOutcome> outcomes;
  std::map<std::string, Decided> decided;  // how each distinct stage (by key) was decided
};

// Decides the stages of `units` (those `reuse` holds an outcome for are taken
// as decided by an earlier run) and folds their outcomes into `report`: its
// verdict, findings and stage statistics.
DecidedStages decide_stages(const Plan& plan, const std::vector<StageUnit>& units,
                            const VerifyOptions& options,
                            std::vector<std::optional<ReusedStage>> reuse, Report& report);

}  // namespace shardproof
