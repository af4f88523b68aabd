// The answer of a verification: verdict, findings, stats; and its renderings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/core/diagnostic.h"
#include "engine/core/ir.h"

namespace shardproof {

enum class Verdict { Equivalent, NotEquivalent, Invalid, Unknown, InternalError };

// "equivalent", "not-equivalent", "invalid", "unknown", "internal-error"
const char* verdict_name(Verdict v);
// Exit codes of `shardproof verify`: 0 equivalent, 1 not equivalent,
// 2 invalid, 3 unknown, 4 internal or I/O failure.
int verdict_exit_code(Verdict v);
// Order used to combine several plans' verdicts: internal > invalid >
// not-equivalent > unknown > equivalent.
int verdict_severity(Verdict v);

struct Finding {
  std::string kind;    // "mismatch" (a claim is false), "unknown" (not decided), "coverage"
  std::string stage;   // stage id, e.g. "stage 3: out[0:8, 0:16]"
  std::string tensor;  // the logical tensor whose claim failed
  std::vector<std::string> parallel_tensors;  // the claiming parallel tensors involved
  // A mismatch that holds at several places in the mesh is one finding: the
  // other parallel tensors whose claim on `tensor` fails the same way (the
  // stage's other failing members, and those of every stage sharing its
  // key: a group bug's whole tp group, every dp rank, every micro-batch).
  std::vector<std::string> also_failing;
  std::vector<std::vector<int64_t>> elements;  // differing elements, full-size indices
  std::vector<std::string> ops;                // parallel ops that produced them
  nlohmann::json counterexample;               // input values at reduced size, and the two results
  std::string message;                         // one readable sentence
  // A captured plan's: where in the user's program the finding's ops came
  // from (their "src"), distinct, in the order of `ops`; then the logical
  // tensor's producer's. Empty for plans without "src".
  std::vector<SourceRef> sources;
};

// Adds `names` to f.also_failing, but not those it already names.
void add_also_failing(Finding& f, const std::vector<std::string>& names);

struct Stats {
  int64_t stages = 0;         // claim stages in the plan
  int64_t unique_stages = 0;  // distinct canonical stages (identical layers share one)
  // How each distinct stage was decided (engine/decide/stage_tally.h): the
  // categories are disjoint and add up to unique_stages (decided_total).
  int64_t proven_trivially = 0;    // proven by normalisation alone
  int64_t solved = 0;              // sent to the solver
  int64_t refuted_by_testing = 0;  // refuted by random values before any solver call
  int64_t symmetric = 0;           // took the proof of a stage that reduces to the same stage
  int64_t untried = 0;             // undecided without a solver call (too large, no semantics)
  int64_t cached = 0;              // from the cache: decided by an earlier verification
  // Proven by the proof of the same reduced query that an earlier
  // verification stored for another stage (another mesh: its proof key),
  // backed at this stage's full size; not its own verdict, so not `cached`.
  int64_t shared_proofs = 0;
  int64_t reused = 0;  // unchanged since the plan's last verification
  int64_t logical_ops = 0;
  int64_t parallel_ops = 0;   // of a compact plan: the op instances it denotes
  int64_t class_anchors = 0;  // compact plan verified per class: corners explored
  // Claim inference (engine/infer/): claims proposed, and those proven and
  // kept in the final cut (the rest were withdrawn).
  int64_t inferred_claims = 0;
  int64_t inferred_kept = 0;
  // Why claim inference did not run on a plan it was asked for (empty: it
  // ran): an undecided plan's report says so, since without claims on its
  // intermediates a stage spans the whole step.
  std::string inference_skipped;
  double seconds = 0;
  // Where the time went (wall seconds): reading the plan, cutting it into
  // stages, reducing and keying them, deciding them (store or solver).
  struct Phases {
    double parse = 0, infer = 0, cut = 0, key = 0, decide = 0;
  } phases;
};

struct Report {
  std::string plan_path;
  std::string plan_name;
  nlohmann::json meta = nlohmann::json::object();
  Verdict verdict = Verdict::Unknown;
  std::vector<Finding> findings;
  std::optional<Diagnostic> invalid;  // set when verdict == Invalid
  std::string error;                  // set when verdict == InternalError
  Stats stats;
};

// The distinct stages the categories of `stats` account for: equal to
// stats.unique_stages in every report.
int64_t decided_total(const Stats& stats);
// Counts every distinct stage as cached: a whole report answered from the
// cache.
void count_all_cached(Stats& stats);
// "4 distinct: 3 trivial, 1 solved, 0 cached" (the verdict line's and the
// daemon log's breakdown; the rarer categories only when not zero).
std::string distinct_breakdown(const Stats& stats);

// The verdict line, without a newline: "plan.json: NOT EQUIVALENT (4 stages, ...)".
std::string report_headline(const Report& report);
// An invalid input's diagnostic: Diagnostic::to_string, or "file:line:
// [rule] message" for one that has no place in a plan (no pointer, no
// column: a torch harness the front end refused).
std::string invalid_text(const Diagnostic& d);
// One verdict line, then each finding readable by a person.
std::string report_to_text(const Report& report);
// One finding as report_to_text shows it: indented lines, counterexample included.
std::string finding_to_text(const Finding& finding);
// A finding's also_failing: the first few names, then how many more.
std::string also_failing_text(const Finding& finding);
// One finding on one line: kind, stage, logical tensor, elements (the first
// few), parallel tensors, ops, then the finding's sentence.
std::string finding_summary(const Finding& finding);

}  // namespace shardproof
