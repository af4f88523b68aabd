// Every solver call is bounded by wall-clock time (engine/prove/bounded_check.h,
// docs/soundness.md section 5): Z3 4.8.12 loses its own timeout at times,
// and the watchdog interrupts the context instead (and abandons a check
// Z3 does not stop even then).
#include "engine/prove/bounded_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/verifier.h"
#include "tests/cli_runner.h"

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
// through nonlinear arithmetic). Both graphs write the denominator as
// another term of the numerator's value (bh + h0 and h0 + bh, the ranks the
// other way round): the algebra turns only a term over itself into 1, so
// Z3 still has to see it. With a 1 s timeout, Z3 4.8.12 stayed in
// one check for minutes (over 100 s measured) and ignored even an
// interrupt: the stage is abandoned a grace period (1 s here) after the
// deadline, so the verdict is unknown within a few timeouts (about 4 s).
// Through the CLI, in a process of its own: the abandoned check keeps
// running until the process exits, which must still exit cleanly (3).
TEST(BoundedCheck, ANonlinearStageZ3OverrunsIsUnknownInBoundedTime) {
  const std::string plan =
      std::string(SHARDPROOF_SOURCE_DIR) + "/tests/data/plans/watchdog/nonlinear-overrun.json";
  const Clock::time_point start = Clock::now();
  // -j1, --rlimit 2000000: the fuzzer's settings, where it was found.
  const testing::CliResult r = testing::run_cli(
      "verify --no-cache -j1 --rlimit 2000000 --timeout-ms 1000 " + testing::shell_quote(plan),
      std::filesystem::temp_directory_path() / "shardproof-bounded-check.err");
  const double took = seconds_since(start);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("UNKNOWN"), std::string::npos) << r.out;
  EXPECT_LT(took, 10.0) << "10x the timeout; " << r.out;
}

// The nice value of each thread of this process (/proc/self/task/*/stat:
// the 19th field, the 17th after the command name's closing parenthesis).
std::vector<int> thread_nice_values() {
  std::vector<int> out;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int i = 0; i < 17 && fields >> field; ++i) {
    }
    if (!field.empty()) out.push_back(std::stoi(field));
  }
  return out;
}

// The same plan in process: the abandoned check runs on (for minutes on
// this plan) at the lowest priority, so it takes only idle time from the
// solves still wanted.
TEST(BoundedCheck, AnAbandonedCheckRunsOnAtTheLowestPriority) {
  ParseResult parsed = parse_plan_file(std::string(SHARDPROOF_SOURCE_DIR) +
                                       "/tests/data/plans/watchdog/nonlinear-overrun.json");
  ASSERT_TRUE(parsed.plan);
  VerifyOptions options;
  options.jobs = 1;
  options.rlimit = 2'000'000;
  options.timeout_ms = 1'000;
  const long overruns = watchdog_overruns();
  const Report r = verify_plan(*parsed.plan, options);
  EXPECT_EQ(r.verdict, Verdict::Unknown);
  ASSERT_GT(watchdog_overruns(), overruns);
  const std::vector<int> nice = thread_nice_values();
  EXPECT_EQ(std::count(nice.begin(), nice.end(), 19), 1) << "threads: " << nice.size();
}

}  // namespace
}  // namespace shardproof
