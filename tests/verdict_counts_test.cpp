// The verdict line adds up (issue 26): every distinct stage is counted in
// exactly one of the ways it can be decided (trivial, solved, refuted by
// testing, symmetric, untried, cached, unchanged), whatever the plan, the
// limits, the store and the path through the engine.
#include <gtest/gtest.h>

#include <string>

#include "engine/classes/class_verifier.h"
#include "engine/decide/stage_store.h"
#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/graph_text.h"
#include "tests/map_store.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

// llama3-tiny, 2 layers over tp2 pp2 with 2 micro-batches.
planner::PlanConfig small_llama(const std::string& bug) {
  planner::PlanConfig c;
  c.layers = 2;
  c.tp = 2;
  c.pp = 2;
  c.microbatches = 2;
  c.bug = bug;
  return c;
}

Plan planned(const std::string& bug) {
  return testing::parse(planner::generate_plan("llama3-tiny", small_llama(bug)));
}

// The same plan in the compact form, kept compact for the class verifier.
Plan planned_compact() {
  planner::PlanConfig c = small_llama("");
  c.compact = true;
  ParseOptions classes;
  classes.compact = ParseOptions::Compact::Classes;
  ParseResult r =
      parse_plan_text(planner::generate_plan("llama3-tiny", c).dump(), "compact.json", "", classes);
  EXPECT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  return r.plan ? std::move(*r.plan) : Plan{};
}

VerifyOptions options_with(StageVerdictStore* store = nullptr) {
  VerifyOptions o;
  o.jobs = 2;
  o.store = store;
  return o;
}

// The counts sum to the distinct stages, and the verdict line says them.
void expect_adds_up(const Report& r) {
  const std::string line = report_headline(r);
  EXPECT_GT(r.stats.unique_stages, 0) << line;
  EXPECT_EQ(decided_total(r.stats), r.stats.unique_stages) << line;
  EXPECT_NE(line.find(std::to_string(r.stats.unique_stages) +
                      " distinct: " + std::to_string(r.stats.proven_trivially) + " trivial, " +
                      std::to_string(r.stats.solved) + " solved, "),
            std::string::npos)
      << line;
}

TEST(VerdictCounts, EquivalentAndNotEquivalentPlansAddUp) {
  Report good = verify_plan(planned(""), options_with());
  ASSERT_EQ(good.verdict, Verdict::Equivalent) << testing::explain(good);
  expect_adds_up(good);
  EXPECT_EQ(good.stats.cached + good.stats.refuted_by_testing + good.stats.untried, 0);

  Report bad = verify_plan(planned("row-parallel-no-allreduce"), options_with());
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent);
  expect_adds_up(bad);
  EXPECT_GT(bad.stats.refuted_by_testing, 0) << report_headline(bad);

  // Without random testing the same refutations come from the solver.
  VerifyOptions untested = options_with();
  untested.test_trials = 0;
  Report solved = verify_plan(planned("row-parallel-no-allreduce"), untested);
  ASSERT_EQ(solved.verdict, Verdict::NotEquivalent);
  expect_adds_up(solved);
  EXPECT_EQ(solved.stats.refuted_by_testing, 0);
  EXPECT_GT(solved.stats.solved, good.stats.solved);
}

TEST(VerdictCounts, UnknownPlansAddUp) {
  VerifyOptions tight = options_with();
  tight.rlimit = 1;  // the solver gives up: solved, yet undecided
  Report gave_up = verify_plan(planned(""), tight);
  ASSERT_EQ(gave_up.verdict, Verdict::Unknown);
  expect_adds_up(gave_up);
  EXPECT_GT(gave_up.stats.solved, 0);

  VerifyOptions tiny = options_with();
  tiny.max_stage_elements = 1;  // too large for the solver, and not tested
  tiny.test_trials = 0;
  Report untried = verify_plan(planned(""), tiny);
  ASSERT_EQ(untried.verdict, Verdict::Unknown);
  expect_adds_up(untried);
  EXPECT_EQ(untried.stats.untried, untried.stats.unique_stages) << report_headline(untried);
}

TEST(VerdictCounts, AWarmStoreCountsEveryDistinctStageCachedOnce) {
  for (const char* bug : {"", "row-parallel-no-allreduce"}) {
    SCOPED_TRACE(bug);
    testing::MapStore store;  // lasts across verifications, as the cache
    Report cold = verify_plan(planned(bug), options_with(&store));
    expect_adds_up(cold);
    EXPECT_EQ(cold.stats.cached, 0);
    Report warm = verify_plan(planned(bug), options_with(&store));
    expect_adds_up(warm);
    EXPECT_EQ(warm.stats.cached, warm.stats.unique_stages) << report_headline(warm);
    EXPECT_EQ(warm.verdict, cold.verdict);
  }
}

// Per class, a key decided in one batch (pipeline stage) or round and met
// again in another is one distinct stage, counted as it was first decided.
TEST(VerdictCounts, PerClassEachKeyIsCountedOnce) {
  Plan compact = planned_compact();
  ASSERT_TRUE(compact.compact);
  Report alone = verify_by_classes(compact, options_with());
  ASSERT_EQ(alone.verdict, Verdict::Equivalent) << testing::explain(alone);
  EXPECT_GT(alone.stats.class_anchors, 0);
  expect_adds_up(alone);
  EXPECT_EQ(alone.stats.cached, 0) << "decided in this run, in an earlier batch or round";

  testing::MapStore store;  // lasts across verifications, as the cache
  Report cold = verify_by_classes(compact, options_with(&store));
  expect_adds_up(cold);
  EXPECT_EQ(cold.stats.cached, 0) << report_headline(cold);
  EXPECT_EQ(cold.stats.unique_stages, alone.stats.unique_stages);
  Report warm = verify_by_classes(compact, options_with(&store));
  expect_adds_up(warm);
  EXPECT_EQ(warm.stats.cached, warm.stats.unique_stages) << report_headline(warm);
}

}  // namespace
}  // namespace shardproof
