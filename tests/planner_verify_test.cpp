// The verdict matrix of generated plans (suite PlannerVerify, run on its own
// while the verifier matures): every correct mlp plan is equivalent; every
// bug is not equivalent and a finding names the logical tensor the bug
// breaks first.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using planner::PlanConfig;

PlanConfig config(int layers, int dp, int tp, int pp, int mb, const std::string& optimizer = "sgd",
                  const std::string& bug = "") {
  return testing::mlp_config(layers, dp, tp, pp, mb, optimizer, bug);
}

using testing::describe;

Report verify(const PlanConfig& c) {
  return testing::verify_json(planner::generate_plan("mlp", c), "planner-verify");
}

TEST(PlannerVerify, CorrectPlansAreEquivalent) {
  for (const PlanConfig& c : testing::mlp_config_matrix()) {
    SCOPED_TRACE(describe(c));
    Report r = verify(c);
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  }
}

TEST(PlannerVerify, OddLayerCountsAreEquivalent) {
  for (const PlanConfig& c :
       {config(1, 2, 2, 1, 2), config(3, 2, 2, 3, 2, "adam"), config(5, 1, 4, 2, 1)}) {
    SCOPED_TRACE(describe(c));
    Report r = verify(c);
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  }
}

// Each bug on configurations it applies to: not equivalent, and some
// finding names exactly the tensor the catalogue (or, off the reference
// shape, bug_first_tensor) gives.
TEST(PlannerVerify, EveryBugIsFoundWhereItFirstShows) {
  for (const planner::BugInfo& bug : planner::list_bugs("mlp"))
    for (PlanConfig c : {config(4, 2, 2, 2, 2), config(4, 2, 4, 4, 2, "adam"),
                         config(3, 2, 2, 3, 2), config(2, 2, 2, 2, 2)}) {
      c.bug = bug.name;
      std::string expected;
      try {
        expected = planner::bug_first_tensor("mlp", c);
      } catch (const std::invalid_argument&) {
        continue;  // the bug does not apply to this configuration
      }
      SCOPED_TRACE(describe(c));
      if (c.layers == 4) {
        EXPECT_EQ(expected, bug.first_tensor_hint);
      }
      Report r = verify(c);
      EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
      bool named = false;
      for (const Finding& f : r.findings) named = named || f.tensor == expected;
      EXPECT_TRUE(named) << "no finding names " << expected << "\n" << testing::explain(r);
    }
}

}  // namespace
}  // namespace shardproof
