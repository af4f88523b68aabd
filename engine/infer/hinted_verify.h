// Verifying an expanded plan with inferred claims (claim_inference.h).
//
// The plan is verified with the proposed claims added. A proposal whose own
// stage is refuted or undecided is *withdrawn*, with every other proposal on
// the same logical tensor (its family); the plan is cut again without them
// and verified again (stages no withdrawal touched keep their outcome),
// until no finding is a proposal's. Each round re-decides every stage, so
// the last round's stages are proven or refuted with exactly the claims of
// that round, each of which is either the plan's own or proven in it: an
// equivalent verdict is a composition of proofs (docs/design.md), and a
// finding is one on a claim of the plan's own, at a stage whose inputs are
// the plan's claims or proven ones. Proposals never decide a verdict; they
// only choose where the plan is cut.
#pragma once

#include <vector>

#include "engine/core/ir.h"
#include "engine/decide/plan_run.h"
#include "engine/infer/claim_inference.h"
#include "engine/report/report.h"

namespace shardproof::infer {

// verify_expanded with claim inference; `record` (may be null) is cleared
// when the final cut holds proposals, since an edit of the plan as written
// cannot reuse their stages.
Report verify_with_inferred_claims(const Plan& plan, const VerifyOptions& options,
                                   StageRecord* record);

// The same with given proposals (tests propose false ones); `infer_seconds`
// is reported as the infer phase.
Report verify_with_proposals(const Plan& plan, const VerifyOptions& options,
                             std::vector<InferredClaim> proposals, StageRecord* record,
                             double infer_seconds = 0);

}  // namespace shardproof::infer
