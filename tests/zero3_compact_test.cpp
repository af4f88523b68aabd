// ZeRO-3 / FSDP (--zero 3) in the compact form: each rank's input is its
// dim-0 shard of a parameter, all-gathered over the dp x cp plane (an expert
// block over its edp group) before the forward, as one template
// (transformer_inputs.cpp, gather_param_compact). Its expansion is the v1
// plan; per coordinate class it is equivalent, and a gradient-sync bug is
// found with v1's first finding.
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

PlanConfig zero3(
    int dp, int tp, int pp, int mb, void (*edit)(PlanConfig&) = [](PlanConfig&) {}) {
  return testing::two_layers(dp, tp, pp, mb, [&](PlanConfig& c) {
    c.zero = 3;
    edit(c);
  });
}

TEST(Zero3Compact, ExpansionIsTheV1Plan) {
  for (int dp : {2, 4})
    for (int tp : {1, 2})
      for (int pp : {1, 2})
        for (int mb : {1, 2}) expect_same_plan("llama3-tiny", zero3(dp, tp, pp, mb));
  expect_same_plan("llama3-tiny", zero3(2, 1, 1, 1, [](PlanConfig& c) { c.cp = 2; }));
  expect_same_plan("llama3-tiny", zero3(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; }));
  expect_same_plan("llama3-tiny", zero3(2, 2, 2, 1, [](PlanConfig& c) { c.clip = true; }));
}

TEST(Zero3Compact, MoeExpansionIsTheV1Plan) {
  // ep = 1 (experts replicated over dp), ep = dp (one owner: not sharded)
  // and the expert mesh 1 < ep < dp (sharded over the edp group).
  for (int ep : {1, 2, 4}) {
    PlanConfig c = zero3(4, 1, 1, 2);
    c.ep = ep;
    expect_same_plan("moe-tiny", c);
    c.tp = 2;
    expect_same_plan("moe-tiny", c);
  }
  PlanConfig c = zero3(2, 1, 1, 1);
  c.ep = 2;
  c.cp = 2;
  expect_same_plan("moe-tiny", c);
}

TEST(Zero3Compact, PerClassEquivalentAndAGradientSyncBugIsFoundAsInV1) {
  PlanConfig c = zero3(4, 2, 2, 2);
  Report ok = by_classes(planner::generate_plan("llama3-tiny", compact(c)));
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
  for (const char* bug : {"dp-grad-not-synced", "dp-grad-mean-not-sum"}) {
    c.bug = bug;
    Report v1 = testing::verify_json(planner::generate_plan("llama3-tiny", c), "v1");
    Report r = by_classes(planner::generate_plan("llama3-tiny", compact(c)));
    ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << bug << "\n" << testing::explain(r);
    ASSERT_FALSE(v1.findings.empty());
    EXPECT_EQ(r.findings.front().tensor, v1.findings.front().tensor) << bug;
  }
}

}  // namespace
}  // namespace shardproof
