// The MoE families end to end: every parallelism kind moe-tiny supports
// (alone and combined) verifies equivalent, the degrees MoE layers do not
// support are refused with a clear message, DeepSeek-V3's published shapes
// verify at small depth through shape reduction, and every bug of the
// moe-tiny catalogue is found and named at the logical tensor the plan says
// it breaks first. One test per configuration, so ctest runs them side by
// side.
//
// moe-tiny (docs/planner-moe.md): layer 0 dense, every later layer MoE (4
// experts, 4 slots per expert and sequence); two layers by default here, so
// the dense reference layer 0 carries the llama bugs and MoE layer 1 the MoE
// bugs. Without --batch the planner gives one sequence per dp rank and
// micro-batch.
#include <gtest/gtest.h>

#include <set>
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

PlanConfig cfg(int layers, int dp, int ep, int tp, int pp, int mb) {
  PlanConfig c = testing::transformer_config(layers, dp, tp, pp, mb);
  c.ep = ep;
  return c;
}

PlanConfig with(PlanConfig c, void (*edit)(PlanConfig&)) {
  edit(c);
  return c;
}

std::string describe(const PlanConfig& c) {
  auto n = [](auto v) { return std::to_string(v); };
  return "L" + n(c.layers) + " dp" + n(c.dp) + " ep" + n(c.ep) + " tp" + n(c.tp) + " pp" + n(c.pp) +
         " mb" + n(c.microbatches) + " cp" + n(c.cp) + (c.sp ? " sp" : "") + " zero" + n(c.zero) +
         (c.tie_embeddings ? " tied" : "") + (c.bias ? " bias" : "") +
         (c.reshard_residual ? " reshard" : "") + (c.batch ? " batch" + n(c.batch) : "") +
         (c.bug.empty() ? "" : " " + c.bug);
}

// --- correct plans

std::vector<Case> correct_cases() {
  return {
      {"single_device", cfg(2, 1, 1, 1, 1, 1)},
      // Expert parallelism off: every dp rank runs every expert and the
      // expert gradients are all-reduced over dp like any weight.
      {"dp2", cfg(2, 2, 1, 1, 1, 1)},
      // ep = dp: the dispatch and combine all_to_all over the dp group.
      {"dp2_ep2", cfg(2, 2, 2, 1, 1, 1)},
      {"dp2_ep2_two_sequences_per_rank",
       with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.batch = 4; })},
      // One expert per rank.
      {"dp4_ep4", cfg(2, 4, 4, 1, 1, 1)},
      // Expert tensor parallelism: the experts' ffn split over tp.
      {"tp2", cfg(2, 1, 1, 2, 1, 1)},
      // tp above the kv heads (2): kv heads replicated; expert ffn 8 / 4.
      {"tp4_kv_replicated", cfg(2, 1, 1, 4, 1, 1)},
      {"pp2_mb2", cfg(2, 1, 1, 1, 2, 2)},
      {"dp2_mb2", cfg(2, 2, 1, 1, 1, 2)},
      {"dp2_ep2_mb2", cfg(2, 2, 2, 1, 1, 2)},
      {"dp2_zero1", with(cfg(2, 2, 1, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; })},
      {"dp2_zero2", with(cfg(2, 2, 1, 1, 1, 1), [](PlanConfig& c) { c.zero = 2; })},
      // ZeRO shards the replicated weights over dp, never the owned experts.
      {"dp2_ep2_zero1", with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; })},
      {"dp2_ep2_zero2", with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 2; })},
      // ZeRO-3 gathers the replicated weights' shards, never the owned experts.
      {"dp2_ep2_zero3", with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 3; })},
      {"tied", with(cfg(2, 1, 1, 1, 1, 1), [](PlanConfig& c) { c.tie_embeddings = true; })},
      {"pp2_tied", with(cfg(2, 1, 1, 1, 2, 1), [](PlanConfig& c) { c.tie_embeddings = true; })},
      {"bias", with(cfg(2, 1, 1, 1, 1, 1), [](PlanConfig& c) { c.bias = true; })},
      {"tp2_bias", with(cfg(2, 1, 1, 2, 1, 1), [](PlanConfig& c) { c.bias = true; })},
      {"tp2_reshard_residual",
       with(cfg(2, 1, 1, 2, 1, 1), [](PlanConfig& c) { c.reshard_residual = true; })},
      {"sgd_dp2_ep2", with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.optimizer = "sgd"; })},
      // Two MoE layers; stage 0 holds dense layer 0 and MoE layer 1.
      {"three_layers_pp2", cfg(3, 1, 1, 1, 2, 1)},
      {"dp2_tp2_pp2_mb2", cfg(2, 2, 1, 2, 2, 2)},
      {"dp2_ep2_tp2_pp2_mb2", cfg(2, 2, 2, 2, 2, 2)},
      // Clipping by the global norm: the experts' squares summed over ep.
      {"clip_dp2_ep2_tp2", with(cfg(2, 2, 2, 2, 1, 1), [](PlanConfig& c) { c.clip = true; })},
      {"clip_dp2_ep2_pp2_zero1",
       with(cfg(2, 2, 2, 1, 2, 1), [](PlanConfig& c) { c.clip = true, c.zero = 1; })},
      // Every option MoE layers allow at once (cp and sp: moe_seq_test.cpp).
      {"everything", with(cfg(2, 2, 2, 2, 2, 2),
                          [](PlanConfig& c) {
                            c.zero = 2, c.tie_embeddings = true, c.bias = true,
                            c.reshard_residual = true;
                          })},
  };
}

class MoeCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeCorrect, IsEquivalent) {
  const Case& c = GetParam();
  const json plan = planner::generate_plan(kTiny, c.config);
  // The plan has MoE layers at all: an MoE layer's dispatch is an input.
  ASSERT_TRUE(plan["logical"]["tensors"].contains("l1.moe.dispatch")) << describe(c.config);
  Report r = testing::verify_json(plan, "moe-" + c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << describe(c.config) << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

// --- configurations the MoE families refuse

void expect_rejected(const std::string& model, const PlanConfig& c, const std::string& words) {
  try {
    planner::generate_plan(model, c);
    ADD_FAILURE() << model << " " << describe(c) << " was accepted; expected: " << words;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << model << " " << describe(c) << ": " << e.what();
  }
}

TEST(MoePlanner, RejectsExpertParallelismNotDividingDp) {
  expect_rejected(kTiny, cfg(2, 4, 3, 1, 1, 1), "ep must divide dp (got ep 3, dp 4)");
  expect_rejected(kTiny, cfg(2, 1, 2, 1, 1, 1), "ep must divide dp (got ep 2, dp 1)");
  expect_rejected(kTiny, cfg(2, 2, 0, 1, 1, 1), "ep must be >= 1 (got 0)");
  // 8 dp ranks cannot share 4 experts.
  expect_rejected(kTiny, with(cfg(2, 8, 8, 1, 1, 1), [](PlanConfig& c) { c.batch = 8; }),
                  "ep (8) must divide the experts (4)");
  expect_rejected("llama3-tiny", cfg(2, 2, 2, 1, 1, 1), "ep applies to MoE models only");
}

// cp and sp apply (moe_seq_test.cpp); cp must divide the slots, each cp
// rank contracting its own block of them into the expert gradients.
TEST(MoePlanner, RejectsContextParallelismNotDividingTheSlots) {
  expect_rejected(kTiny, with(cfg(2, 1, 1, 1, 1, 1), [](PlanConfig& c) { c.cp = 8; }),
                  "cp (8) must divide the expert capacity (4 slots)");
}

TEST(MoePlanner, RejectsBugsThatCannotFire) {
  auto bug = [](PlanConfig c, const char* name) {
    c.bug = name;
    return c;
  };
  // One layer of moe-tiny is the dense layer 0: no MoE layer to corrupt.
  expect_rejected(kTiny, bug(cfg(1, 1, 1, 1, 1, 1), "moe-combine-missing-shared"),
                  "needs an MoE layer");
  expect_rejected(kTiny, bug(cfg(2, 2, 2, 1, 1, 1), "expert-grad-not-synced"),
                  "needs dp >= 2 and ep < dp");
  expect_rejected(kTiny,
                  bug(with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; }),
                      "expert-grad-double-reduced"),
                  "needs ep = dp >= 2, zero 0");
  // One sequence per rank and micro-batch cannot be split over 2 ranks.
  expect_rejected(kTiny, bug(cfg(2, 2, 2, 1, 1, 1), "all-to-all-dims-swapped"),
                  "ep dividing the sequences per dp rank and micro-batch");
  expect_rejected(kTiny, bug(cfg(2, 1, 1, 2, 1, 1), "all-to-all-wrong-order"), "needs ep >= 2");
  // Three layers: the reference layer 1 is an MoE layer, without a dense MLP.
  expect_rejected(kTiny, bug(cfg(3, 1, 1, 2, 1, 1), "fused-gate-up-contiguous"),
                  "is an MoE layer (no dense MLP)");
  // One stage holding dense layer 0 and MoE layer 1: their weights differ.
  expect_rejected(kTiny, bug(cfg(2, 1, 1, 1, 1, 1), "pp-stage-layers-swapped"),
                  "one dense, one MoE");
}

// The MoE families list the MoE bugs and the cp/sp ones, never the
// interleaved pipeline's they refuse; the dense family lists none of them.
TEST(MoePlanner, CatalogueHasTheMoeBugsAndTheContextAndSequenceBugs) {
  const std::vector<std::string> moe_bugs = {
      "expert-out-not-reduced-tp",     "expert-grad-not-reduced-tp",
      "router-grad-not-synced",        "expert-grad-not-synced",
      "expert-grad-double-reduced",    "all-to-all-dims-swapped",
      "all-to-all-wrong-order",        "moe-combine-missing-shared",
      "expert-grad-on-dp-group",       "shared-expert-grad-on-edp-group",
      "expert-grad-averaged-over-edp", "moe-sp-dispatch-local-tokens",
      "moe-sp-combine-wrong-piece",    "moe-cp-dispatch-local-chunk",
      "moe-cp-combine-wrong-chunk",    "moe-cp-expert-grad-all-slots",
      "etp-tokens-not-split",          "etp-split-gather-reversed",
      "etp-expert-grad-on-dp-group"};
  auto names_of = [](const std::string& model) {
    std::set<std::string> names;
    for (const planner::BugInfo& b : planner::list_bugs(model)) {
      EXPECT_TRUE(names.insert(b.name).second) << model << ": duplicate " << b.name;
      EXPECT_FALSE(b.description.empty()) << b.name;
      EXPECT_FALSE(b.real_world.empty()) << b.name;
    }
    return names;
  };
  for (const std::string model : {"moe-tiny", "deepseek-v3"}) {
    SCOPED_TRACE(model);
    const std::set<std::string> names = names_of(model);
    // Every dense bug applies to MoE models too, the interleaved pipeline's included.
    for (const char* seq : {"vpp-send-wrong-chunk", "sp-allgather-dim", "sp-norm-grad-not-reduced", "cp-kv-allgather-order",
                            "cp-kv-grad-not-reduced", "cp-loss-scale-local"})
      EXPECT_TRUE(names.count(seq)) << seq;
    for (const std::string& moe_bug : moe_bugs) EXPECT_TRUE(names.count(moe_bug)) << moe_bug;
  }
  // deepseek-v3 has as many kv heads as heads: tp never exceeds them.
  EXPECT_TRUE(names_of("moe-tiny").count("kv-heads-not-replicated"));
  EXPECT_FALSE(names_of("deepseek-v3").count("kv-heads-not-replicated"));
  const std::set<std::string> dense = names_of("llama3-tiny");
  for (const std::string& moe_bug : moe_bugs) EXPECT_FALSE(dense.count(moe_bug)) << moe_bug;
}

// --- DeepSeek-V3's published shapes

// Hidden 7168, 128 heads, vocabulary 129280, sequence 4096, 256 experts of
// 128 slots: only sound shape reduction (the expert and slot dimensions
// included) makes this fit. Layers 0..2 are dense, so 4 layers is the
// smallest depth with an MoE layer; every parallelism kind MoE layers allow
// is on.
PlanConfig deepseek_config() {
  return cfg(4, 2, 2, 2, 2, 2);
}

TEST(DeepseekV3PublishedShapes, FourLayersEveryKindIsEquivalent) {
  const json plan = planner::generate_plan("deepseek-v3", deepseek_config());
  EXPECT_EQ(plan["meta"]["hidden"], 7168);
  EXPECT_EQ(plan["meta"]["experts"], 256);
  EXPECT_EQ(plan["meta"]["capacity"], 128);
  EXPECT_EQ(plan["meta"]["first_dense"], 3);
  ASSERT_TRUE(plan["logical"]["tensors"].contains("l3.moe.dispatch"));
  Report r = testing::verify_json(plan, "deepseek-v3");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  // Identical stages (the same layer on another dp rank or micro-batch) are
  // solved once.
  EXPECT_LT(r.stats.unique_stages * 2, r.stats.stages);
}

// An expert-parallel bug at the published sizes: reducing 256 experts and 128
// slots must keep the combine all_to_all's reversed group visible.
TEST(DeepseekV3PublishedShapes, FourLayersAllToAllWrongOrderIsFound) {
  PlanConfig c = deepseek_config();
  c.bug = "all-to-all-wrong-order";
  const json plan = planner::generate_plan("deepseek-v3", c);
  ASSERT_EQ(plan["meta"]["bug_first_tensor"], "l3.moe.out");
  Report r = testing::verify_json(plan, "deepseek-v3-bug");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "l3.moe.out") << testing::explain(r);
}

// --- the bug catalogue

// The first configuration (from a list covering every parallelism kind
// moe-tiny allows) a bug applies to.
PlanConfig config_for(const std::string& bug) {
  // Smallest first, so each bug runs on the cheapest configuration it
  // shows on: tp bugs on tp2, dp and expert-parallel bugs on dp2 ep2.
  std::vector<PlanConfig> candidates = {
      cfg(2, 1, 1, 2, 1, 1),
      // Two sequences per rank so that ep divides them (all-to-all-dims-swapped).
      with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.batch = 4; }),
      cfg(2, 2, 1, 1, 1, 1),  // ep = 1: expert gradients all-reduced over dp
      with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; }),
      cfg(2, 1, 1, 1, 2, 2),
      with(cfg(2, 1, 1, 1, 2, 1), [](PlanConfig& c) { c.tie_embeddings = true; }),
      cfg(2, 1, 1, 4, 1, 1),
      // The last stage holds two MoE layers (layers 2 and 3).
      cfg(4, 1, 1, 1, 2, 1),
      with(cfg(2, 1, 1, 2, 1, 1), [](PlanConfig& c) { c.bias = true; }),
      with(cfg(2, 1, 1, 2, 1, 1), [](PlanConfig& c) { c.reshard_residual = true; }),
      // The training-step catalogue (step_bugs.cpp).
      cfg(2, 2, 2, 2, 1, 1),
      with(cfg(2, 2, 2, 2, 1, 1), [](PlanConfig& c) { c.clip = true; }),
      with(cfg(2, 1, 1, 1, 2, 1), [](PlanConfig& c) { c.clip = true; }),
      cfg(2, 2, 2, 1, 1, 2),
      with(cfg(2, 2, 2, 1, 2, 1), [](PlanConfig& c) { c.tie_embeddings = true, c.zero = 1; }),
      with(cfg(2, 1, 1, 1, 2, 2), [](PlanConfig& c) { c.schedule = true; }),
      with(cfg(2, 2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 3; }),
      // ep groups inside dp (moe_edp_test.cpp runs every expert-mesh bug here).
      cfg(2, 4, 2, 1, 1, 1),
      // Sequence and context parallelism (moe_seq_test.cpp).
      with(cfg(2, 1, 1, 2, 1, 1), [](PlanConfig& c) { c.sp = true; }),
      with(cfg(2, 2, 1, 2, 1, 1), [](PlanConfig& c) { c.sp = true; }),
      with(cfg(2, 1, 1, 1, 1, 1), [](PlanConfig& c) { c.cp = 2; }),
      with(cfg(2, 4, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; }),
      // The interleaved pipeline: chunks {0}, {1} on rank 0 and 1, then {2}, {3}.
      with(cfg(4, 1, 1, 1, 2, 2), [](PlanConfig& c) { c.vpp = 2; }),
      with(cfg(4, 1, 1, 1, 2, 2), [](PlanConfig& c) { c.vpp = 2, c.schedule = true; }),
      // Megatron's expert mesh with etp below tp (moe_etp_test.cpp): edp is all four ranks.
      with(cfg(2, 2, 1, 2, 1, 1), [](PlanConfig& c) { c.etp = 1; }),
  };
  for (PlanConfig c : candidates) {
    c.bug = bug;
    try {
      planner::bug_first_tensor(kTiny, c);
      return c;
    } catch (const std::invalid_argument&) {
    }
  }
  ADD_FAILURE() << "no test configuration fits bug " << bug;
  return {};
}

std::vector<std::string> bug_names() {
  std::vector<std::string> names;
  for (const planner::BugInfo& b : planner::list_bugs(kTiny)) names.push_back(b.name);
  return names;
}

class MoeBug : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeBug, IsFoundWhereItFirstShows) {
  const PlanConfig c = config_for(GetParam());
  ASSERT_EQ(c.bug, GetParam());
  const json plan = planner::generate_plan(kTiny, c);
  const std::string expected = plan["meta"].value("bug_first_tensor", "");
  EXPECT_EQ(expected, planner::bug_first_tensor(kTiny, c));
  Report r = testing::verify_json(plan, "moe-" + GetParam());
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << describe(c) << "\n" << testing::explain(r);
  ASSERT_FALSE(r.findings.empty()) << describe(c);
  // Mismatches come first; a stage assumes its inputs' claims, so the
  // corrupted site's claim is the one that fails.
  // (A schedule bug leaves the graphs correct: its finding is the schedule's.)
  EXPECT_EQ(r.findings[0].kind, expected == "schedule" ? "schedule" : "mismatch")
      << describe(c) << "\n"
      << testing::explain(r);
  EXPECT_EQ(r.findings[0].tensor, expected) << describe(c) << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Catalogue, MoeBug, ::testing::ValuesIn(bug_names()), [](const auto& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (ch == '-') ch = '_';
  return name;
});

}  // namespace
}  // namespace shardproof
