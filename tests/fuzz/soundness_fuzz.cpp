// The soundness fuzzer (docs/soundness.md, section 8): random small
// well-typed plans, verified by the engine and checked against an exact
// evaluation at full size (the concrete interpreter on the unreduced
// stages: rationals, random inputs, random stand-ins for the uninterpreted
// functions). Two generators take turns: one-rank copies of random graphs
// (one_rank_plans.cpp) and sharded plans with collectives and integer
// positions (sharded_plans.cpp), each with or without an injected fault.
// A disagreement is
//   - *equivalent* while full-size values differ, or while the solver
//     refutes the unreduced plan (a soundness bug), or
//   - *not equivalent* for a plan the solver proves at full size, or for a
//     plan built without a fault (a false alarm).
// Usage: shardproof_soundness_fuzz SECONDS [SEED] [OUT_DIR]; prints
// "N plans, M disagreements" and exits 1 when M > 0, leaving each
// disagreeing plan in OUT_DIR. For comparing two builds on the same plans:
// SOUNDNESS_FUZZ_PLANS=N stops after N plans (whatever SECONDS says), and
// SOUNDNESS_FUZZ_TIMES=FILE writes each plan's number, kind and CPU seconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/prove/bounded_check.h"
#include "engine/prove/stage_testing.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/fuzz/one_rank_plans.h"
#include "tests/fuzz/sharded_plans.h"

namespace shardproof {
namespace {

// Whether random full-size values show a difference in some stage (integer
// inputs also aimed at the stage's constants: an off-by-one shard bound).
bool differs_at_full_size(const Plan& plan, int trials) {
  for (const Stage& s : build_stages(plan))
    if (refute_by_testing(s, trials, true)) return true;
  return false;
}

struct Oracle {
  VerifyOptions options, full_size;
  Oracle() {
    options.jobs = 1;
    // Small plans: a query that needs more is left unknown (never a disagreement).
    options.rlimit = 2'000'000;
    options.timeout_ms = 1'000;
    full_size = options;  // the exact oracle: no reduction
    full_size.reduce_shapes = false;
  }
  // "" when the verdict agrees with full size, else what disagrees. A plan
  // with an injected fault that comes back equivalent is also proven at
  // full size (random values can miss a difference on few inputs).
  std::string check(const Plan& plan, bool faulty, Verdict& verdict) const {
    verdict = verify_plan(plan, options).verdict;
    if (verdict == Verdict::Equivalent) {
      if (differs_at_full_size(plan, 3)) return "equivalent, but full-size values differ";
      if (faulty && verify_plan(plan, full_size).verdict == Verdict::NotEquivalent)
        return "equivalent, but refuted at full size";
    }
    // Full-size values that differ settle it without a proof: a stage that
    // differs on some input cannot be proven equivalent at any size.
    if (verdict == Verdict::NotEquivalent && !differs_at_full_size(plan, 3) &&
        verify_plan(plan, full_size).verdict == Verdict::Equivalent)
      return "not equivalent, but proven equivalent at full size";
    // Without a fault the plan is right by construction: a refutation is a
    // false alarm the full-size solver can share (a stage cut that frees a
    // tensor another rank recomputes, docs/soundness.md section 2).
    if (verdict == Verdict::NotEquivalent && !faulty)
      return "not equivalent, but built without a fault";
    return "";
  }
};

}  // namespace
}  // namespace shardproof

int main(int argc, char** argv) {
  using namespace shardproof;
  const double seconds = argc > 1 ? std::stod(argv[1]) : 10;
  const uint64_t seed = argc > 2 ? std::stoull(argv[2]) : 1;
  const std::string out_dir = argc > 3 ? argv[3] : ".";
  fuzz::Random random(seed);
  const Oracle oracle;
  const bool dump_all = std::getenv("SOUNDNESS_FUZZ_DUMP") != nullptr;
  const char* plan_limit = std::getenv("SOUNDNESS_FUZZ_PLANS");
  const int64_t max_plans = plan_limit ? std::stoll(plan_limit) : -1;
  std::ofstream times;
  if (const char* path = std::getenv("SOUNDNESS_FUZZ_TIMES")) times.open(path);
  // Per generator family: plans by verdict ("invalid" from a sharded
  // family is a generator bug and counts as a disagreement).
  std::map<std::string, std::map<std::string, int64_t>> tally;
  const auto start = std::chrono::steady_clock::now();
  int64_t plans = 0, disagreements = 0;
  while (max_plans >= 0
             ? plans < max_plans
             : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
                   seconds) {
    fuzz::FuzzPlan fp = plans % 2 ? fuzz::sharded_plan(random) : fuzz::one_rank_plan(random);
    ++plans;
    const std::string family = fp.kind.substr(0, fp.kind.find('/'));
    if (dump_all) {  // SOUNDNESS_FUZZ_DUMP: every plan, before it is checked (a hang shows)
      std::string name = fp.kind;
      std::replace(name.begin(), name.end(), '/', '.');
      std::ofstream(out_dir + "/" + std::to_string(plans) + "-" + name + ".json")
          << fp.plan.dump(1);
    }
    const std::clock_t plan_start = std::clock();
    ParseResult parsed = parse_plan_text(fp.plan.dump(), "fuzz.json", "");
    std::string problem;
    Verdict verdict = Verdict::Invalid;
    if (parsed.plan)
      problem = oracle.check(*parsed.plan, fp.faulty, verdict);
    else if (family != "one-rank")
      problem = "the generator wrote an invalid plan: " + parsed.error->to_string();
    ++tally[family][verdict_name(verdict)];
    if (times.is_open())
      times << plans << " " << fp.kind << " " << verdict_name(verdict) << " "
            << static_cast<double>(std::clock() - plan_start) / CLOCKS_PER_SEC << "\n";
    if (problem.empty()) continue;
    ++disagreements;
    const std::string path =
        out_dir + "/soundness-" + std::to_string(seed) + "-" + std::to_string(plans) + ".json";
    std::ofstream(path) << fp.plan.dump(1) << "\n";
    std::cerr << "disagreement (" << fp.kind << ": " << problem << "): " << path << "\n";
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Per CPU second too: on a shared machine the wall-clock rate varies with load.
  const double cpu = static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
  std::printf("soundness fuzz: %lld plans in %.1f s (%.0f/s; %.0f per CPU second)\n",
              static_cast<long long>(plans), took, plans / took, plans / cpu);
  for (const auto& [family, verdicts] : tally) {
    std::printf("  %-16s", family.c_str());
    for (const auto& [v, n] : verdicts)
      std::printf(" %s %lld", v.c_str(), static_cast<long long>(n));
    std::printf("\n");
  }
  // Checks past their deadline (bounded_check.h): interrupted, and of those
  // the ones Z3 did not stop (their stage abandoned, unknown).
  std::printf("  watchdog: %ld checks interrupted, %ld abandoned\n", watchdog_interrupts(),
              watchdog_overruns());
  std::printf("soundness fuzz: %lld disagreements\n", static_cast<long long>(disagreements));
  return disagreements > 0 ? 1 : 0;
}
