#include "engine/prove/full_size_check.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/prove/counterexample.h"
#include "engine/prove/full_size_witness.h"
#include "engine/prove/input_free_stage.h"
#include "engine/prove/stage_testing.h"
#include "engine/stage/shape_reduction.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

bool shrunk(const Stage& s) {
  for (const StageTensor& t : s.tensors)
    if (t.shape != t.full_shape) return true;
  return false;
}

StageOutcome unknown(const Stage& s, StageOutcome out, const std::string& why) {
  Finding f;
  f.kind = "unknown";
  f.stage = "stage " + std::to_string(s.id) + ": " + s.title;
  f.tensor = s.tensors[s.target].name;
  f.message = why;
  out.status = StageStatus::Unknown;
  out.findings = {f};
  return out;
}

// A proof at reduced size, tested at full size or at a second reduction.
StageOutcome back_proof(const Stage& full, StageOutcome out, const FullSizeBudget& budget,
                        const ProverOptions& options) {
  std::optional<Finding> found;
  std::string where;
  if (full.element_count() <= budget.test_elements) {
    found = refute_by_testing(full, 1);
    where = "at full size";
  } else {
    Stage second = full;
    reduce_stage(second, budget.second_piece);
    if (!second.reduced || second.element_count() > options.max_test_elements) return out;
    found = refute_by_testing(second, 1);
    where = "at pieces of " + std::to_string(budget.second_piece);
  }
  if (!found) return out;
  return unknown(full, std::move(out),
                 "SOUNDNESS: shape reduction proved this stage at pieces of 2, but random values " +
                     where + " refute it (" + found->message +
                     "); the reduction rules miss a case here: please report it");
}

// The mismatch findings of `out` that hold at full size (full_size_witness.h),
// or nullopt and why none does.
const ReducedValues* values_of(const StageOutcome& out, size_t finding) {
  return finding < out.values.size() ? out.values[finding].get() : nullptr;
}

std::optional<std::vector<Finding>> witnessed(const Stage& full, const Stage& reduced,
                                              const StageOutcome& out, const FullSizeBudget& budget,
                                              std::string& why) {
  std::vector<Finding> found;
  why = "no mismatch to replay";
  for (size_t i = 0; i < out.findings.size(); ++i) {
    const Finding& f = out.findings[i];
    if (f.kind != "mismatch") continue;
    if (std::optional<Finding> w =
            full_size_witness(full, reduced, f, values_of(out, i), budget.witness, why))
      found.push_back(std::move(*w));
  }
  if (found.empty()) return std::nullopt;
  return found;
}

// A refutation of a stage too large to test whole: confirmed on the
// sub-stage its failing elements need, else proven again at a second piece
// size, whose refutation must be confirmed the same way. Anything else is
// unknown: neither a finding without a witness nor a proof at reduced size
// that contradicts one.
StageOutcome witness_large(const Stage& full, const Stage& reduced, StageOutcome out,
                           const FullSizeBudget& budget, const ProverOptions& options) {
  std::string why;
  if (std::optional<std::vector<Finding>> w = witnessed(full, reduced, out, budget, why)) {
    out.findings = std::move(*w);
    return out;
  }
  std::string second_why = "it stays too large";
  Stage second = full;
  reduce_stage(second, budget.second_piece);
  const std::string pieces = "pieces of " + std::to_string(budget.second_piece);
  if (second.reduced) {
    StageOutcome again = prove_stage(second, options);
    out.queries += again.queries;
    if (again.status == StageStatus::Refuted) {
      std::string why_again;
      if (std::optional<std::vector<Finding>> w =
              witnessed(full, second, again, budget, why_again)) {
        again.findings = std::move(*w);
        again.seconds += out.seconds;
        again.queries = out.queries;
        return again;
      }
      second_why = "refuted there too, without a full-size witness (" + why_again + ")";
    } else if (again.status == StageStatus::Proven) {
      second_why = "proven there";
    } else {
      second_why = "undecided there";
    }
  }
  return unknown(full, std::move(out),
                 "refuted at reduced size, but the counterexample does not hold at full size (" +
                     why + "); at " + pieces + " the stage is " + second_why +
                     ": a counterexample that exists only at reduced size is no finding");
}

// A refutation at reduced size, confirmed at full size or withdrawn.
StageOutcome witness(const Stage& full, const Stage& reduced, StageOutcome out,
                     const FullSizeBudget& budget, const ProverOptions& options) {
  if (full.element_count() > budget.test_elements)
    return witness_large(full, reduced, std::move(out), budget, options);
  // The reduced counterexample lifted to full size, then random values.
  for (size_t i = 0; i < out.findings.size(); ++i) {
    const ReducedValues* values = values_of(out, i);
    if (out.findings[i].kind != "mismatch" || !values) continue;
    if (std::optional<Finding> f = replay_lifted(full, places_in(full), reduced, *values)) {
      out.findings = {witnessed_at_full_size(out.findings[i], *f, {}, full.element_count())};
      out.values.clear();
      return out;
    }
  }
  if (refute_by_testing(full, std::max(options.test_trials, 3), /*aim_at_constants=*/true))
    return out;
  if (full.element_count() <= budget.solve_elements) {
    StageOutcome again = prove_stage(full, options);
    again.seconds += out.seconds;
    again.queries += out.queries;
    return again;
  }
  return unknown(full, std::move(out),
                 "refuted at reduced size, but no full-size witness was found (the "
                 "counterexample may exist only at the reduced size)");
}

// Up to `count` elements of the target's claimed slice, spread over it, at
// full size (a reduced stage's stand for the first positions of pieces).
std::vector<std::vector<int64_t>> spread_elements(const Stage& s, int count) {
  int64_t n = 1;
  for (auto [lo, hi] : s.slice) n *= hi - lo;
  std::vector<std::vector<int64_t>> out;
  if (n <= 0) return out;
  for (int k = 0; k < count; ++k) {
    const int64_t e = count == 1 ? 0 : (n - 1) * k / (count - 1);
    std::vector<int64_t> full = full_index(s, e);
    if (out.empty() || out.back() != full) out.push_back(std::move(full));
  }
  return out;
}

// A stage still too large to prove after reduction: tested at full size on
// the sub-stages some target elements need; a mismatch is a finding with a
// full-size witness, anything else leaves it unknown.
StageOutcome probe_large(const Stage& full, const Stage& reduced, StageOutcome out,
                         const FullSizeBudget& budget) {
  std::string why;
  std::optional<Finding> f = probe_at_full_size(
      full, spread_elements(reduced, budget.probe.elements_tried), budget.probe, why);
  if (!f) {
    for (Finding& u : out.findings)
      if (u.kind == "unknown") u.message += "; tested at full size: " + why;
    return out;
  }
  out.status = StageStatus::Refuted;
  out.findings = {*f};
  out.values.clear();
  return out;
}

}  // namespace

StageOutcome check_at_full_size(const Stage& full, const Stage& reduced, StageOutcome outcome,
                                const ProverOptions& options, const FullSizeBudget& budget) {
  const auto start = Clock::now();
  const double before = outcome.seconds;
  // Undecided, but reading no input: one exact evaluation decides it.
  if (outcome.status == StageStatus::Unknown)
    if (std::optional<StageOutcome> exact = decide_input_free(full, options.max_test_elements)) {
      exact->seconds = before + std::chrono::duration<double>(Clock::now() - start).count();
      return *exact;
    }
  const bool too_large = outcome.status == StageStatus::Unknown &&
                         reduced.element_count() > options.max_stage_elements;
  if (!too_large && (!reduced.reduced || !shrunk(reduced))) return outcome;
  if (too_large)
    outcome = probe_large(full, reduced, std::move(outcome), budget);
  else if (outcome.status == StageStatus::Proven)
    outcome = back_proof(full, std::move(outcome), budget, options);
  else if (outcome.status == StageStatus::Refuted)
    outcome = witness(full, reduced, std::move(outcome), budget, options);
  else
    return outcome;
  outcome.seconds = std::max(outcome.seconds, before) +
                    std::chrono::duration<double>(Clock::now() - start).count();
  return outcome;
}

}  // namespace shardproof
