// The interleaved pipeline (--vpp) on MoE models and in the compact form:
// the chunks are layer ranges, MoE layers among them, and the wrap-around
// send from the last pp rank back to rank 0 is a send by a pp offset of
// -(pp - 1). Correct plans verify equivalent in both forms (the compact one
// expanding to the v1 plan); the chunk bug is found, first at its tensor.
//
// moe-tiny (docs/planner-moe.md): layer 0 dense, the others MoE.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/graph_text.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::compact;
using testing::expect_same_plan;

using nlohmann::json;
using planner::PlanConfig;

struct Case {
  std::string label;
  std::string model;
  PlanConfig config;
};

// Four layers on pp2 vpp2: chunks {0}, {1} on rank 0 and 1, {2}, {3} back.
PlanConfig vpp2(int dp, int ep, int tp, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(4, dp, tp, 2, 2);
  c.vpp = 2;
  c.ep = ep;
  if (edit) edit(c);
  return c;
}

std::vector<Case> correct_cases() {
  return {
      {"moe_pp2_vpp2", "moe-tiny", vpp2(1, 1, 1)},
      {"moe_dp2_ep2_tp2_schedule", "moe-tiny",
       vpp2(2, 2, 2, [](PlanConfig& c) { c.schedule = true; })},
      // The expert mesh (ep < dp) on interleaved stages.
      {"moe_dp4_ep2", "moe-tiny", vpp2(4, 2, 1)},
      {"moe_three_chunks_pp2", "moe-tiny",
       vpp2(1, 1, 1, [](PlanConfig& c) { c.layers = 6, c.vpp = 3; })},
      {"deepseek_dp2_ep2", "deepseek-v3", vpp2(2, 2, 1, [](PlanConfig& c) { c.seq = 4; })},
  };
}

class MoeVppCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeVppCorrect, IsEquivalent) {
  const Case& c = GetParam();
  Report r = testing::verify_json(planner::generate_plan(c.model, c.config), "vpp-" + c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << c.label << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Interleaved, MoeVppCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

void expect_bug_found(const std::string& model, PlanConfig c, const std::string& stem) {
  c.bug = "vpp-send-wrong-chunk";
  testing::expect_bug_found_first(planner::generate_plan(model, c), stem);
}

TEST(MoeVpp, SendWrongChunkIsFound) {
  expect_bug_found("moe-tiny", vpp2(1, 1, 1), "moe-vpp-bug");
  expect_bug_found("moe-tiny", vpp2(4, 2, 1), "moe-vpp-edp-bug");
  expect_bug_found("moe-tiny", compact(vpp2(2, 2, 2)), "moe-vpp-compact-bug");
}

TEST(CompactVpp, ExpansionIsTheV1Plan) {
  for (int pp : {2, 3})
    for (int vpp : {2, 3}) {
      PlanConfig c = testing::transformer_config(pp * vpp, 2, 2, pp, pp);
      c.vpp = vpp;
      expect_same_plan("llama3-tiny", c);
      c.bug = "vpp-send-wrong-chunk";
      expect_same_plan("llama3-tiny", c);
    }
  // Uneven chunks (5 layers over 4), ZeRO and sp.
  PlanConfig c = testing::transformer_config(5, 2, 2, 2, 2);
  c.vpp = 2, c.zero = 1, c.sp = true;
  expect_same_plan("llama3-tiny", c);
  for (int ep : {1, 2}) {
    PlanConfig m = vpp2(2, ep, 2);
    expect_same_plan("moe-tiny", m);
    m.bug = "vpp-send-wrong-chunk";
    expect_same_plan("moe-tiny", m);
  }
}

// Both forms of one configuration verify equivalent; the bug is found in both.
TEST(CompactVpp, BothFormsEquivalentAndBugFound) {
  PlanConfig c = testing::transformer_config(6, 2, 2, 3, 3);
  c.vpp = 2;
  for (const PlanConfig& form : {c, compact(c)}) {
    Report r = testing::verify_json(planner::generate_plan("llama3-tiny", form),
                                    form.compact ? "vpp-compact" : "vpp-v1");
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  }
  expect_bug_found("llama3-tiny", compact(c), "vpp-compact-bug");
}

}  // namespace
}  // namespace shardproof
