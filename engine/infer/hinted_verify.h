// Verifying an expanded plan with inferred claims (claim_inference.h).
//
// The plan is verified with the proposed claims added. A proposed claim is
// *withdrawn*, with every other proposal on the same logical tensor (its
// family), when a finding involves it: its own stage is refuted or
// undecided, or the failing stage of a claim of the plan's own reads it. The plan is then cut
// again without them and verified again, until no finding involves a
// proposal. So every finding reported is one the plan as written has at the
// same stage boundaries of its own claims, and an equivalent verdict rests on
// proofs of every stage, the proposals' included: a proven claim is a claim
// like any other (composition, docs/design.md). Proposals never decide a
// verdict; they only choose where the plan is cut.
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
