#include "engine/infer/hinted_verify.h"

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "engine/infer/claim_inference.h"

namespace shardproof::infer {
namespace {

using Clock = std::chrono::steady_clock;

// Rounds of withdrawal before giving the proposals up altogether.
constexpr int kMaxRounds = 4;

// The logical tensors of the proposals among a finding's claiming tensors:
// proposals whose own stage was refuted or left undecided.
std::set<int> failed_families(const Plan& hinted, const std::vector<char>& proposed,
                              const Finding& f) {
  std::set<int> families;
  for (const auto* names : {&f.parallel_tensors, &f.also_failing}) {
    for (const std::string& name : *names) {
      const int t = hinted.parallel.find(name);
      if (t >= 0 && proposed[static_cast<size_t>(t)])
        families.insert(hinted.parallel.tensors[static_cast<size_t>(t)].of->logical);
    }
  }
  return families;
}

}  // namespace

Report verify_with_inferred_claims(const Plan& plan, const VerifyOptions& options,
                                   StageRecord* record) {
  const auto start = Clock::now();
  InferenceResult inferred = infer_claims(plan);
  Report report =
      verify_with_proposals(plan, options, std::move(inferred.claims), record,
                            std::chrono::duration<double>(Clock::now() - start).count());
  report.stats.inference_skipped = inferred.skipped;
  return report;
}

Report verify_with_proposals(const Plan& plan, const VerifyOptions& options,
                             std::vector<InferredClaim> proposals, StageRecord* record,
                             double infer_seconds) {
  const auto start = Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(infer_seconds));
  if (proposals.empty()) {
    Report report = verify_expanded(plan, options, record);
    report.stats.phases.infer = infer_seconds;
    report.stats.seconds += infer_seconds;
    return report;
  }

  // Outcomes decided in one round serve the next (the stages that no
  // withdrawal touched are the same stages).
  MemoryVerdictStore memory(options.store);
  VerifyOptions round_options = options;
  round_options.store = &memory;

  const int64_t proposed_count = static_cast<int64_t>(proposals.size());
  std::vector<InferredClaim> active = std::move(proposals);
  Report report;
  for (int round = 0; round < kMaxRounds && !active.empty(); ++round) {
    const Plan hinted = with_claims(plan, active);
    std::vector<char> proposed(plan.parallel.tensors.size(), 0);
    for (const InferredClaim& c : active) proposed[static_cast<size_t>(c.parallel)] = 1;
    report = verify_expanded(hinted, round_options, nullptr);
    if (report.verdict == Verdict::InternalError) break;
    std::set<int> withdraw;
    for (const Finding& f : report.findings)
      for (int family : failed_families(hinted, proposed, f)) withdraw.insert(family);
    if (withdraw.empty()) {
      if (record) *record = StageRecord{};
      report.stats.inferred_claims = proposed_count;
      report.stats.inferred_kept = static_cast<int64_t>(active.size());
      report.stats.phases.infer = infer_seconds;
      report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return report;
    }
    std::vector<InferredClaim> kept;
    for (InferredClaim& c : active)
      if (!withdraw.count(c.of.logical)) kept.push_back(std::move(c));
    active = std::move(kept);
  }
  // Every proposal withdrawn (or too many rounds): the plan as written.
  report = verify_expanded(plan, round_options, record);
  report.stats.inferred_claims = proposed_count;
  report.stats.phases.infer = infer_seconds;
  report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace shardproof::infer
