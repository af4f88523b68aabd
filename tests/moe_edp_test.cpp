// Expert parallelism inside data parallelism (1 < ep < dp), the expert mesh
// of Megatron: ep groups of ep consecutive dp ranks each own every expert
// block once, and each block has edp = dp / ep replicas (its
// expert-data-parallel group). Correct plans verify equivalent; every bug
// that applies with ep < dp is found, first at the tensor it names; the
// bugs that need ep = dp (or ep < dp) are refused elsewhere.
//
// moe-tiny (docs/planner-moe.md): 4 experts, layer 1 is the MoE layer; one
// sequence per dp rank and micro-batch unless --batch says otherwise.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using planner::PlanConfig;

const char* const kTiny = "moe-tiny";

struct Case {
  std::string label;
  PlanConfig config;
};

// dp 4, ep 2: ep groups {0, 1} and {2, 3}, edp groups {0, 2} and {1, 3}.
PlanConfig dp4_ep2(void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(2, 4, 1, 1, 1);
  c.ep = 2;
  if (edit) edit(c);
  return c;
}

std::vector<Case> correct_cases() {
  return {
      {"dp4_ep2", dp4_ep2()},
      {"dp4_ep2_mb2", dp4_ep2([](PlanConfig& c) { c.microbatches = 2; })},
      {"dp4_ep2_tp2", dp4_ep2([](PlanConfig& c) { c.tp = 2; })},
      {"dp4_ep2_two_sequences", dp4_ep2([](PlanConfig& c) { c.batch = 8; })},
      // Expert blocks ZeRO-sharded over their edp group (two shards each).
      {"dp4_ep2_zero1", dp4_ep2([](PlanConfig& c) { c.zero = 1; })},
      {"dp4_ep2_zero2_mb2", dp4_ep2([](PlanConfig& c) { c.zero = 2, c.microbatches = 2; })},
      {"dp4_ep2_zero3", dp4_ep2([](PlanConfig& c) { c.zero = 3; })},
      // The experts' squares summed within the ep group.
      {"dp4_ep2_clip_tp2", dp4_ep2([](PlanConfig& c) { c.clip = true, c.tp = 2; })},
      {"dp4_ep2_clip_zero2", dp4_ep2([](PlanConfig& c) { c.clip = true, c.zero = 2; })},
      {"dp4_ep2_pp2_mb2", dp4_ep2([](PlanConfig& c) { c.pp = 2, c.microbatches = 2; })},
  };
}

class MoeEdpCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEdpCorrect, IsEquivalent) {
  const Case& c = GetParam();
  const json plan = planner::generate_plan(kTiny, c.config);
  Report r = testing::verify_json(plan, "moe-edp-" + c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << c.label << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeEdpCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

// The all_to_all runs within each ep group, the expert gradient sync within
// each edp group, the dense one over every dp rank.
TEST(MoeEdpPlan, GroupsAreTheExpertMesh) {
  const json plan = planner::generate_plan(kTiny, dp4_ep2());
  const json& ops = plan["parallel"]["ops"];
  auto group_of = [&](const std::string& name) {
    for (const json& op : ops)
      if (op["name"] == name) return op["group"];
    ADD_FAILURE() << "no op " << name;
    return json();
  };
  EXPECT_EQ(group_of("dp2.tp0.pp0.mb0.l1.moe.xin.ep_dispatch"), json({2, 3}));
  EXPECT_EQ(group_of("dp1.tp0.pp0.grad.l1.moe.wg.dp_all_reduce"), json({1, 3}));
  EXPECT_EQ(group_of("dp0.tp0.pp0.grad.l1.moe.wsg.dp_all_reduce"), json({0, 1, 2, 3}));
}

// ZeRO shards an expert block over its edp group (Megatron's distributed
// optimizer), a dense weight over dp: the reduce-scatter, the gather of the
// updated shards, and under ZeRO-3 the parameter gather run on those groups,
// and dp rank 3 holds shard 1 of its block (its place in {1, 3}).
TEST(MoeEdpPlan, ZeroShardsExpertBlocksOverEdp) {
  auto op_of = [](const json& plan, const std::string& name) {
    for (const json& op : plan["parallel"]["ops"])
      if (op["name"] == name) return op;
    ADD_FAILURE() << "no op " << name;
    return json();
  };
  const json z2 = planner::generate_plan(kTiny, dp4_ep2([](PlanConfig& c) { c.zero = 2; }));
  EXPECT_EQ(op_of(z2, "dp1.tp0.pp0.grad.l1.moe.wg.dp_reduce_scatter")["group"], json({1, 3}));
  EXPECT_EQ(op_of(z2, "dp1.tp0.pp0.l1.moe.wg.zero_all_gather")["group"], json({1, 3}));
  EXPECT_EQ(op_of(z2, "dp0.tp0.pp0.grad.l1.moe.wsg.dp_reduce_scatter")["group"],
            json({0, 1, 2, 3}));
  const json& shard = z2["parallel"]["tensors"]["dp3.tp0.pp0.l1.moe.wg.shard"];
  EXPECT_EQ(shard["shape"][0], 1);                   // 2 local experts over 2 edp ranks
  EXPECT_EQ(shard["of"]["slice"][0], json({3, 4}));  // ep rank 1's block, shard 1
  const json z3 = planner::generate_plan(kTiny, dp4_ep2([](PlanConfig& c) { c.zero = 3; }));
  EXPECT_EQ(op_of(z3, "dp1.tp0.pp0.l1.moe.wg.zero3_all_gather")["group"], json({1, 3}));
}

// Bugs that apply with ep < dp, on dp4 ep2 (two sequences per rank where
// the bug splits them, tp2 or --clip where it needs them).
struct BugCase {
  std::string bug;
  PlanConfig config;
};

std::vector<BugCase> bug_cases() {
  auto bug = [](const char* name, PlanConfig c) {
    c.bug = name;
    return BugCase{name, c};
  };
  return {
      bug("expert-grad-on-dp-group", dp4_ep2()),
      bug("shared-expert-grad-on-edp-group", dp4_ep2()),
      bug("expert-grad-averaged-over-edp", dp4_ep2()),
      bug("expert-grad-scaled-by-dp", dp4_ep2()),
      bug("expert-grad-not-synced", dp4_ep2()),
      bug("router-grad-not-synced", dp4_ep2()),
      bug("all-to-all-wrong-order", dp4_ep2()),
      bug("all-to-all-dims-swapped", dp4_ep2([](PlanConfig& c) { c.batch = 8; })),
      bug("clip-norm-missing-ep", dp4_ep2([](PlanConfig& c) { c.clip = true; })),
      bug("expert-out-not-reduced-tp", dp4_ep2([](PlanConfig& c) { c.tp = 2; })),
      bug("zero-expert-shard-dp-rank", dp4_ep2([](PlanConfig& c) { c.zero = 1; })),
  };
}

class MoeEdpBug : public ::testing::TestWithParam<BugCase> {};

TEST_P(MoeEdpBug, IsFoundWhereItFirstShows) {
  const BugCase& c = GetParam();
  testing::expect_bug_found_first(planner::generate_plan(kTiny, c.config), "moe-edp-" + c.bug);
}

INSTANTIATE_TEST_SUITE_P(Dp4Ep2, MoeEdpBug, ::testing::ValuesIn(bug_cases()), [](const auto& info) {
  std::string name = info.param.bug;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
});

void expect_refused(PlanConfig c, const char* bug, const std::string& words) {
  c.bug = bug;
  try {
    planner::generate_plan(kTiny, c);
    ADD_FAILURE() << bug << " was accepted; expected: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << bug << ": " << e.what();
  }
}

// Each expert-mesh bug needs its own configuration: no correct plan is
// written in its place.
TEST(MoeEdpPlan, RefusesBugsOutsideTheirMesh) {
  PlanConfig ep_eq_dp = testing::transformer_config(2, 2, 1, 1, 1);
  ep_eq_dp.ep = 2;
  expect_refused(ep_eq_dp, "expert-grad-on-dp-group", "needs 1 < ep < dp, zero 0");
  expect_refused(ep_eq_dp, "shared-expert-grad-on-edp-group", "needs 1 < ep < dp, zero 0");
  expect_refused(ep_eq_dp, "expert-grad-averaged-over-edp", "needs dp >= 2 and ep < dp");
  expect_refused(dp4_ep2(), "expert-grad-double-reduced", "needs ep = dp >= 2, zero 0");
  expect_refused(dp4_ep2([](PlanConfig& c) { c.zero = 1; }), "expert-grad-on-dp-group",
                 "needs 1 < ep < dp, zero 0");
  expect_refused(dp4_ep2(), "zero-expert-shard-dp-rank", "needs zero 1 and 1 < ep < dp");
  ep_eq_dp.zero = 1;
  expect_refused(ep_eq_dp, "zero-expert-shard-dp-rank", "needs zero 1 and 1 < ep < dp");
}

// DeepSeek-V3's published shapes (256 experts of 128 slots, hidden 7168) at
// 4 layers on dp4 ep2 tp2 pp2 with 2 micro-batches: equivalent, and the
// expert gradient on the dp group found at its tensor.
TEST(DeepseekV3Edp, PublishedShapesEquivalentAndDpGroupBugFound) {
  PlanConfig c = testing::transformer_config(4, 4, 2, 2, 2);
  c.ep = 2;
  Report r = testing::verify_json(planner::generate_plan("deepseek-v3", c), "deepseek-edp");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  c.bug = "expert-grad-on-dp-group";
  r = testing::verify_json(planner::generate_plan("deepseek-v3", c), "deepseek-edp-bug");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "grad.l3.moe.wg") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
