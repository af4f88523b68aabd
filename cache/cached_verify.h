// One verification of a self-contained plan text (no graph references, so
// nothing is read from disk) with the verdict cache, the same for the daemon
// and for `verify --no-daemon`: a plan whose exact text was verified before
// is answered from its stored report; otherwise the engine runs, taking
// stage verdicts from options.store, and a definite report is kept.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "cache/verdict_cache.h"
#include "engine/plan_memo.h"
#include "engine/report/report.h"
#include "engine/verifier.h"

namespace shardproof::cache {

// Runs on a miss, before the text is parsed; false stops there (the daemon
// refuses plans that still reference graph files and explains why itself),
// and the returned report is then an internal error saying so.
using AdmitPlan = std::function<bool()>;

// What a plan's stored report is filed under: its exact text and every
// version a report depends on. The client computes it too, to ask the
// daemon for a stored report without sending the text.
struct PlanIdentity {
  std::string key, digest;
};
PlanIdentity plan_identity(const std::string& text);

// The stored report of the plan with this identity, as a run that found
// every distinct stage in the cache reports it (nothing solved); progress
// gets one event. nullopt when there is none.
std::optional<Report> stored_plan_report(VerdictCache& cache, const PlanIdentity& id,
                                         const std::string& path, const VerifyOptions& options);

// `path` names the plan in the report. `cache` may be null (no plan memo).
// With a `memo` (the daemon's, for this path) an edit of the plan verified
// last re-reads and re-decides only what the edit reached (plan_memo.h).
Report verify_with_cache(const std::string& path, std::string text, const VerifyOptions& options,
                         VerdictCache* cache, const AdmitPlan& admit = {},
                         PlanMemo* memo = nullptr);

}  // namespace shardproof::cache
