// Every solver call is bounded by wall-clock time (engine/prove/bounded_check.h,
// docs/soundness.md section 5): Z3 4.8.12 loses its own timeout at times,
// and the watchdog interrupts the context instead.
#include "engine/prove/bounded_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "engine/verifier.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// n + 1 pigeons in n holes: unsat, and for n = 11 far beyond a second.
void add_pigeonhole(z3::solver& solver, int n) {
  z3::context& ctx = solver.ctx();
  auto p = [&](int i, int j) {
    return ctx.bool_const(("p" + std::to_string(i) + "_" + std::to_string(j)).c_str());
  };
  for (int i = 0; i <= n; ++i) {
    z3::expr_vector holes(ctx);
    for (int j = 0; j < n; ++j) holes.push_back(p(i, j));
    solver.add(z3::mk_or(holes));
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i <= n; ++i)
      for (int k = i + 1; k <= n; ++k) solver.add(!(p(i, j) && p(k, j)));
}

// A query cut at its deadline is unknown, and the context it ran in
// answers the next query (the interrupt does not stay set).
TEST(BoundedCheck, AQueryPastItsDeadlineIsUnknownAndTheContextStaysUsable) {
  z3::context ctx;
  for (int round = 0; round < 3; ++round) {
    z3::solver hard(ctx);
    add_pigeonhole(hard, 11);
    const Clock::time_point start = Clock::now();
    std::string why;
    EXPECT_EQ(bounded_check(hard, 200, &why), z3::unknown);
    EXPECT_LT(seconds_since(start), 2.0) << "round " << round;
    EXPECT_FALSE(why.empty());
    z3::solver easy(ctx);
    const z3::expr x = ctx.real_const("x");
    easy.add(x * x == 2 && x > 0);
    EXPECT_EQ(bounded_check(easy, 10'000), z3::sat) << "round " << round;
    easy.add(x < 1);
    EXPECT_EQ(bounded_check(easy, 10'000), z3::unsat) << "round " << round;
  }
}

// A plan from the soundness fuzzer (log_softmax of h / h, each rank's row
// mean claimed as the whole mean; equal in fact, since h / h = 1, but only
// through nonlinear arithmetic). With a 1 s timeout, Z3 4.8.12 stayed in
// one check for minutes (over 100 s measured): its own timer did not fire.
// The watchdog bounds each check, so the verdict is unknown within a few
// timeouts (about 3 s: the first try, the element pass, the whole query).
TEST(BoundedCheck, ANonlinearStageZ3OverrunsIsUnknownInBoundedTime) {
  VerifyOptions options;
  options.jobs = 1;
  options.rlimit = 2'000'000;  // the fuzzer's budget, where it was found
  options.timeout_ms = 1'000;
  const Clock::time_point start = Clock::now();
  const Report r = verify_plan_file(
      std::string(SHARDPROOF_SOURCE_DIR) + "/tests/data/plans/watchdog/nonlinear-overrun.json",
      options);
  const double took = seconds_since(start);
  EXPECT_EQ(r.verdict, Verdict::Unknown) << testing::explain(r);
  EXPECT_LT(took, 10.0) << "10x the timeout; " << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
