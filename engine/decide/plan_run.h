// Verifies an expanded plan: cuts it into stages and decides each (from the
// store, from an identical stage, or by proof), composing one Report. The
// class verifier runs it on the part of a compact plan it cut out; the front
// door (verifier.h) on every expanded plan.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/decide/stage_store.h"
#include "engine/decide/stage_tally.h"
#include "engine/format/plan_parser.h"
#include "engine/format/plan_revision.h"
#include "engine/report/report.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_memo.h"

namespace shardproof {

// One stage decided, for progress displays and the daemon's progress events.
struct VerifyProgress {
  int64_t done = 0;     // stages decided so far
  int64_t total = 0;    // stages in the plan
  int64_t cached = 0;   // of those, taken from the store
  int64_t solving = 0;  // stages being solved right now
  std::string stage;    // the stage just decided, e.g. "stage 3: out[0:8, 0:16]"
  // "proven", "refuted", "unknown", "error"; "exploring": the class verifier
  // explored `done` of `total` class corners (no stage decided yet).
  const char* status = "";
  const char* source = "";  // "solved", "cache" (the store) or "duplicate" (an identical stage)
};

// Claim inference (engine/infer/): proposing claims on unclaimed
// intermediates, each proven before it cuts the plan. Auto: for plans
// captured from a program (ops with "src"), whose own claims are only the
// parameters, gradients and updates.
enum class ClaimInference { Auto, On, Off };
const char* claim_inference_name(ClaimInference mode);  // "auto", "on", "off"
std::optional<ClaimInference> parse_claim_inference(const std::string& name);

struct VerifyOptions {
  int jobs = 0;                          // solver threads; 0 = all cores
  uint64_t rlimit = 20'000'000;          // Z3 resource limit per claim query (deterministic)
  bool reduce_shapes = true;             // shape reduction (off only for debugging)
  int64_t max_stage_elements = 200'000;  // larger reduced stages are reported unknown
  // Wall-clock backstop per query in ms (0: none): Z3 4.8 does not count
  // every nonlinear search step against rlimit. Hitting it gives unknown.
  unsigned timeout_ms = 60'000;
  int test_trials = 3;  // random concrete trials per stage before the solver
  // Called after each stage is decided, one call at a time. May be empty.
  std::function<void(const VerifyProgress&)> progress;
  // Where definite stage verdicts are looked up and kept (null: nowhere).
  // Outcomes taken from it count as `cached` in the stats, never as solved
  // (unless it says they were decided earlier in this run).
  StageVerdictStore* store = nullptr;
  // Where proofs run (empty: on the verifier's own threads).
  SolveExecutor executor;
  // Stage identities already known by unreduced content, kept across runs
  // (a daemon's); null: a memo of this run only.
  StageIdentityMemo* identity_memo = nullptr;
  ClaimInference infer_claims = ClaimInference::Auto;
  // How verify_plan_file reads a compact plan (expanded, or per class).
  ParseOptions parse;
};

// A stage an earlier run decided, for a later run to take as it is.
struct ReusedStage {
  StageIdentity id;
  StageOutcome outcome;  // proven or refuted: nothing a limit could change
};

// What a verification leaves for verifying the plan's next edit: its stage
// units and, per stage, the identity and definite outcome it got.
struct StageRecord {
  std::vector<StageUnit> units;
  std::vector<std::optional<ReusedStage>> stages;  // per unit
  std::vector<std::string> verdict_keys;           // per unit (StageIdentity::verdict)
  // How each distinct stage (by StageIdentity::key) was decided: the class
  // verifier counts a key once across its batches.
  std::map<std::string, Decided> decided;
};

// Verifies an expanded plan (plan.compact unset), keeping the record of the
// run in `record` if it is not null.
Report verify_expanded(const Plan& plan, const VerifyOptions& options, StageRecord* record);

// Verifies an expanded plan that `record` was made for with the ops in
// `edits` changed, reusing every stage whose cones hold no edited op
// (verifier.h, verify_plan_edit). `record` must hold a complete record.
Report verify_expanded_edit(const Plan& plan, const OpEdits& edits, const VerifyOptions& options,
                            StageRecord& record);

}  // namespace shardproof
