// Sequence and context parallelism on MoE models (planner/moe_seq.cpp): the
// normed tokens are all-gathered over tp (sp) and cp into whole sequences
// before routing (capacity counts whole sequences), every rank keeps its own
// piece of the combined output, and each cp rank contracts its own block of
// slots into the expert gradients. Correct plans verify equivalent, alone
// and with the other flags; the sp/cp bugs are found at the tensor they
// name (the catalogue test in moe_verify_test.cpp runs each once too); what
// cannot apply is refused.
//
// moe-tiny (docs/planner-moe.md): layer 0 dense, layer 1 MoE (4 experts of
// 4 slots, sequence 8); one sequence per dp rank and micro-batch.
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

PlanConfig cfg(int dp, int ep, int tp, int cp, bool sp, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(2, dp, tp, 1, 1);
  c.ep = ep, c.cp = cp, c.sp = sp;
  if (edit) edit(c);
  return c;
}

std::vector<Case> correct_cases() {
  return {
      {"tp2_sp", cfg(1, 1, 2, 1, true)},
      {"tp4_sp", cfg(1, 1, 4, 1, true)},
      {"cp2", cfg(1, 1, 1, 2, false)},
      {"cp4", cfg(1, 1, 1, 4, false)},
      {"cp2_tp2_sp", cfg(1, 1, 2, 2, true)},
      {"dp2_ep2_tp2_sp", cfg(2, 2, 2, 1, true)},
      // Expert blocks under cp: their gradients summed over the cp ranks.
      {"dp2_ep2_cp2", cfg(2, 2, 1, 2, false)},
      {"dp2_cp2", cfg(2, 1, 1, 2, false)},
      {"dp4_ep2_cp2", cfg(4, 2, 1, 2, false)},
      {"dp2_ep2_cp2_tp2_sp", cfg(2, 2, 2, 2, true)},
      {"cp2_tp2_sp_mb2", cfg(1, 1, 2, 2, true, [](PlanConfig& c) { c.microbatches = 2; })},
      {"cp2_pp2_mb2", cfg(1, 1, 1, 2, false, [](PlanConfig& c) { c.pp = 2, c.microbatches = 2; })},
      {"tp2_sp_pp2_mb2",
       cfg(1, 1, 2, 1, true, [](PlanConfig& c) { c.pp = 2, c.microbatches = 2; })},
      {"dp2_cp2_zero1", cfg(2, 1, 1, 2, false, [](PlanConfig& c) { c.zero = 1; })},
      {"dp2_ep2_cp2_zero3", cfg(2, 2, 1, 2, false, [](PlanConfig& c) { c.zero = 3; })},
      {"dp2_ep2_cp2_tp2_sp_clip", cfg(2, 2, 2, 2, true, [](PlanConfig& c) { c.clip = true; })},
      {"tp2_sp_bias", cfg(1, 1, 2, 1, true, [](PlanConfig& c) { c.bias = true; })},
  };
}

class MoeSeqCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeSeqCorrect, IsEquivalent) {
  const Case& c = GetParam();
  const json plan = planner::generate_plan(kTiny, c.config);
  Report r = testing::verify_json(plan, "moe-seq-" + c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << c.label << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeSeqCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

// The routed tokens are whole sequences: all-gathered over tp, then cp.
TEST(MoeSeqPlan, RoutesGatheredSequences) {
  const json plan = planner::generate_plan(kTiny, cfg(1, 1, 2, 2, true));
  const json& ops = plan["parallel"]["ops"];
  auto find = [&](const std::string& name) {
    for (const json& op : ops)
      if (op["name"] == name) return op;
    ADD_FAILURE() << "no op " << name;
    return json();
  };
  const json gather = find("dp0.cp0.tp0.pp0.mb0.l1.mn.out.cp_all_gather");
  EXPECT_EQ(gather["op"], "all_gather");
  EXPECT_EQ(gather["group"], json({0, 2}));  // tp rank 0 of cp ranks 0 and 1
  EXPECT_EQ(find("dp0.cp1.tp1.pp0.mb0.l1.moe.y.own")["op"], "slice");
}

// Each sp/cp bug on the configurations it needs (and on one with both).
struct BugCase {
  std::string label, bug;
  PlanConfig config;
};

std::vector<BugCase> bug_cases() {
  auto bug = [](const std::string& label, const char* name, PlanConfig c) {
    c.bug = name;
    return BugCase{label, name, c};
  };
  const PlanConfig sp = cfg(1, 1, 2, 1, true), cp = cfg(1, 1, 1, 2, false),
                   both = cfg(2, 2, 2, 2, true);
  return {
      bug("sp", "moe-sp-dispatch-local-tokens", sp),
      bug("sp", "moe-sp-combine-wrong-piece", sp),
      bug("cp", "moe-cp-dispatch-local-chunk", cp),
      bug("cp", "moe-cp-combine-wrong-chunk", cp),
      bug("cp", "moe-cp-expert-grad-all-slots", cp),
      bug("both", "moe-sp-dispatch-local-tokens", both),
      bug("both", "moe-cp-combine-wrong-chunk", both),
      bug("both", "moe-cp-expert-grad-all-slots", both),
      bug("sp", "sp-allgather-dim", sp),
      bug("sp", "sp-norm-grad-not-reduced", sp),
      bug("cp", "cp-kv-grad-not-reduced", cp),
      bug("cp", "cp-loss-scale-local", cp),
      // The expert mesh's bugs with the expert gradients summed over cp too.
      bug("cp_ep2", "expert-grad-double-reduced", cfg(2, 2, 1, 2, false)),
      bug("cp_edp", "expert-grad-on-dp-group", cfg(4, 2, 1, 2, false)),
      bug("cp_ep2_clip", "clip-norm-missing-ep",
          cfg(2, 2, 1, 2, false, [](PlanConfig& c) { c.clip = true; })),
  };
}

class MoeSeqBug : public ::testing::TestWithParam<BugCase> {};

TEST_P(MoeSeqBug, IsFoundWhereItFirstShows) {
  const BugCase& c = GetParam();
  testing::expect_bug_found_first(planner::generate_plan(kTiny, c.config), "moe-seq-" + c.bug);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeSeqBug, ::testing::ValuesIn(bug_cases()), [](const auto& info) {
  std::string name = info.param.label + "_" + info.param.bug;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
});

void expect_refused(const std::string& model, const PlanConfig& c, const std::string& words) {
  try {
    planner::generate_plan(model, c);
    ADD_FAILURE() << model << " was accepted; expected: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(MoeSeqPlan, RefusesWhatCannotApply) {
  // 4 slots per expert and sequence cannot be cut into 8 cp blocks (the
  // sequence, 8 tokens, could).
  expect_refused(kTiny, cfg(1, 1, 1, 8, false), "cp (8) must divide the expert capacity (4 slots)");
  // The sp/cp bugs need their parallelism.
  PlanConfig c = cfg(1, 1, 2, 1, false);
  c.bug = "moe-sp-dispatch-local-tokens";
  expect_refused(kTiny, c, "needs --sp");
  c.bug = "moe-cp-combine-wrong-chunk";
  expect_refused(kTiny, c, "needs cp >= 2");
  // The interleaved pipeline is not written for MoE layers.
  c = cfg(1, 1, 1, 2, false, [](PlanConfig& e) { e.bug = "vpp-send-wrong-chunk"; });
  expect_refused(kTiny, c, "vpp");
  // The compact form: the sp and cp bugs keeping another rank's piece or
  // chunk, in the expanded form only (transformer_compact_test.cpp runs sp
  // and cp).
  c = cfg(1, 1, 1, 2, false, [](PlanConfig& e) { e.compact = true; });
  c.bug = "moe-cp-combine-wrong-chunk";
  expect_refused(kTiny, c, "--bug moe-cp-combine-wrong-chunk");
  c = cfg(1, 1, 2, 1, true, [](PlanConfig& e) { e.compact = true; });
  c.bug = "moe-sp-combine-wrong-piece";
  expect_refused(kTiny, c, "--bug moe-sp-combine-wrong-piece");
}

// DeepSeek-V3's published shapes (hidden 7168, 256 experts of 128 slots,
// sequence 4096) at 4 layers (layer 3 MoE) with sp and cp together.
TEST(DeepseekV3Seq, PublishedShapesSpCpEquivalentAndChunkBugFound) {
  PlanConfig c = testing::transformer_config(4, 2, 2, 1, 1);
  c.ep = 2, c.cp = 2, c.sp = true;
  Report r = testing::verify_json(planner::generate_plan("deepseek-v3", c), "deepseek-seq");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  c.bug = "moe-cp-combine-wrong-chunk";
  r = testing::verify_json(planner::generate_plan("deepseek-v3", c), "deepseek-seq-bug");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "l3.moe.y") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
