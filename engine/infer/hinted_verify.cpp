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

// The logical tensors of the proposals a finding involves: proposals on the
// finding's parallel tensors; when there are none (a claim of the plan's own
// failed), those its stage reads (walking the parallel graph back from them
// to the nearest claimed tensors).
std::set<int> involved_families(const Plan& hinted, const std::vector<char>& proposed,
                                const Finding& f) {
  const Graph& g = hinted.parallel;
  std::set<int> families;
  std::vector<int> stack;
  std::vector<char> seen(g.tensors.size(), 0);
  for (const std::string& name : f.parallel_tensors) {
    const int t = g.find(name);
    if (t < 0) continue;
    if (proposed[static_cast<size_t>(t)])
      families.insert(g.tensors[static_cast<size_t>(t)].of->logical);
    stack.push_back(t);
    seen[static_cast<size_t>(t)] = 1;
  }
  // A failing proposal goes first; what its stage read may be fine.
  if (!families.empty()) return families;
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    const int op = g.producer[static_cast<size_t>(t)];
    if (op < 0) continue;
    for (int in : g.ops[static_cast<size_t>(op)].in) {
      if (seen[static_cast<size_t>(in)]) continue;
      seen[static_cast<size_t>(in)] = 1;
      const TensorDecl& d = g.tensors[static_cast<size_t>(in)];
      if (d.of) {
        if (proposed[static_cast<size_t>(in)]) families.insert(d.of->logical);
        continue;  // a claim: the stage's boundary
      }
      stack.push_back(in);
    }
  }
  return families;
}

}  // namespace

Report verify_with_inferred_claims(const Plan& plan, const VerifyOptions& options,
                                   StageRecord* record) {
  const auto start = Clock::now();
  InferenceResult inferred = infer_claims(plan);
  return verify_with_proposals(plan, options, std::move(inferred.claims), record,
                               std::chrono::duration<double>(Clock::now() - start).count());
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
  MemoryVerdictStore memory;
  VerifyOptions round_options = options;
  if (!round_options.store) round_options.store = &memory;

  const int64_t proposed_count = static_cast<int64_t>(proposals.size());
  std::vector<InferredClaim> active = std::move(proposals);
  Report report;
  for (int round = 0; round < kMaxRounds && !active.empty(); ++round) {
    const Plan hinted = with_claims(plan, active);
    std::vector<char> proposed(plan.parallel.tensors.size(), 0);
    for (const InferredClaim& c : active) proposed[static_cast<size_t>(c.parallel)] = 1;
    memory.take_hits();
    report = verify_expanded(hinted, round_options, nullptr);
    report.stats.cached -= memory.take_hits();  // decided in an earlier round
    if (report.verdict == Verdict::InternalError) break;
    std::set<int> withdraw;
    for (const Finding& f : report.findings)
      for (int family : involved_families(hinted, proposed, f)) withdraw.insert(family);
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
  memory.take_hits();
  report = verify_expanded(plan, round_options, record);
  report.stats.cached -= memory.take_hits();
  report.stats.inferred_claims = proposed_count;
  report.stats.phases.infer = infer_seconds;
  report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace shardproof::infer
