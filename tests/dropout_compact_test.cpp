// Dropout (--dropout) in the compact form: a rank's mask is drawn by the
// `random` op at its own slice's positions, so the op's "offset" list holds
// expressions of the coordinate (`{"expr": "tp*8"}` items,
// docs/plan-format.md). The expansion is the v1 plan; per coordinate class
// it is equivalent, with tp, sp, cp, pp and micro-batches; the two dropout
// bugs, which pick their ranks in the expanded form, are refused by name.
#include <gtest/gtest.h>

#include <string>

#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using planner::PlanConfig;
using testing::by_classes;
using testing::compact;
using testing::expect_same_plan;

PlanConfig dropout(
    int dp, int tp, int pp, int mb, void (*edit)(PlanConfig&) = [](PlanConfig&) {}) {
  return testing::two_layers(dp, tp, pp, mb, [&](PlanConfig& c) {
    c.dropout = true;
    edit(c);
  });
}

TEST(DropoutCompact, ExpansionIsTheV1Plan) {
  for (int dp : {1, 2})
    for (int tp : {1, 2})
      for (int pp : {1, 2}) expect_same_plan("llama3-tiny", dropout(dp, tp, pp, 2));
  expect_same_plan("llama3-tiny", dropout(2, 2, 1, 1, [](PlanConfig& c) { c.sp = true; }));
  expect_same_plan("llama3-tiny", dropout(2, 1, 1, 1, [](PlanConfig& c) { c.cp = 2; }));
  expect_same_plan("llama3-tiny", dropout(2, 2, 2, 2, [](PlanConfig& c) { c.clip = true; }));
}

TEST(DropoutCompact, PerClassEquivalent) {
  for (bool sp : {false, true}) {
    PlanConfig c = dropout(4, 2, 2, 3);
    c.sp = sp;
    Report r = by_classes(planner::generate_plan("llama3-tiny", compact(c)));
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << sp << "\n" << testing::explain(r);
  }
}

// A mask drawn at the wrong positions is found per class: the two tp
// ranks' sp offsets swapped (tp*K written K - tp*K), so each draws the other
// rank's mask.
TEST(DropoutCompact, AMaskAtAnotherRanksPositionsIsFoundPerClass) {
  PlanConfig c = dropout(2, 2, 1, 1, [](PlanConfig& x) { x.sp = true; });
  nlohmann::json plan = planner::generate_plan("llama3-tiny", compact(c));
  int moved = 0;
  for (auto& op : plan["parallel"]["programs"][0]["ops"])
    if (op["op"] == "random")
      for (auto& item : op["attrs"]["offset"])
        if (item.is_object() && item["expr"].get<std::string>().rfind("tp*", 0) == 0) {
          const std::string e = item["expr"].get<std::string>();  // the sequence's "tp*K"
          item["expr"] = e.substr(3) + " - " + e;
          ++moved;
        }
  ASSERT_GT(moved, 0);
  Report r = by_classes(plan);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
}

TEST(DropoutCompact, TheDropoutBugsAreRefusedByName) {
  for (const char* bug : {"dropout-rng-replicated-differs", "dropout-rng-sharded-same"}) {
    PlanConfig c = dropout(1, 2, 1, 1);
    c.sp = std::string(bug) == "dropout-rng-sharded-same";
    c.bug = bug;
    testing::expect_compact_refused("llama3-tiny", c, "--bug " + std::string(bug));
  }
}

}  // namespace
}  // namespace shardproof
