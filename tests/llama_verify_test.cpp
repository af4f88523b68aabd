// The llama3 family end to end: every parallelism kind (alone and combined)
// verifies equivalent on the tiny model, the published 8B shape verifies at
// small depth through shape reduction, and every catalogued bug is found and
// named at the logical tensor it breaks first. One test per configuration,
// so ctest runs them side by side.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using planner::PlanConfig;

struct Case {
  std::string label;
  PlanConfig config;
};

PlanConfig cfg(int layers, int dp, int tp, int pp, int mb) {
  return testing::transformer_config(layers, dp, tp, pp, mb);
}

Case with(std::string label, PlanConfig c, void (*edit)(PlanConfig&) = nullptr) {
  if (edit) edit(c);
  return {std::move(label), c};
}

std::vector<Case> correct_cases() {
  return {
      with("single_device", cfg(2, 1, 1, 1, 1)),
      with("dp2", cfg(2, 2, 1, 1, 1)),
      with("tp2", cfg(2, 1, 2, 1, 1)),
      with("tp4_kv_replicated", cfg(2, 1, 4, 1, 1)),
      with("pp2_mb2", cfg(4, 1, 1, 2, 2)),
      with("dp2_mb2", cfg(2, 2, 1, 1, 2)),
      with("tp2_sp", cfg(2, 1, 2, 1, 1), [](PlanConfig& c) { c.sp = true; }),
      with("cp2", cfg(2, 1, 1, 1, 1), [](PlanConfig& c) { c.cp = 2; }),
      with("cp2_tp2_sp", cfg(2, 1, 2, 1, 1), [](PlanConfig& c) { c.cp = 2, c.sp = true; }),
      with("dp2_zero1", cfg(2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 1; }),
      with("dp2_cp2_zero2", cfg(2, 2, 1, 1, 1), [](PlanConfig& c) { c.zero = 2, c.cp = 2; }),
      with("tied", cfg(2, 1, 2, 1, 1), [](PlanConfig& c) { c.tie_embeddings = true; }),
      with("pp2_tied", cfg(4, 1, 1, 2, 1), [](PlanConfig& c) { c.tie_embeddings = true; }),
      with("sgd_tp2", cfg(2, 1, 2, 1, 1), [](PlanConfig& c) { c.optimizer = "sgd"; }),
      with("dp2_tp2_pp2_mb2", cfg(2, 2, 2, 2, 2)),
      with("clip_tp2_pp2", cfg(2, 1, 2, 2, 1), [](PlanConfig& c) { c.clip = true; }),
      with("clip_dp2_zero1_sp_kv_replicated", cfg(2, 2, 4, 1, 1),
           [](PlanConfig& c) { c.clip = true, c.zero = 1, c.sp = true; }),
      with("clip_dp2_tp2_pp2_zero2_tied", cfg(2, 2, 2, 2, 2),
           [](PlanConfig& c) { c.clip = true, c.zero = 2, c.tie_embeddings = true; }),
      with("dropout_dp2_tp2_mb2", cfg(2, 2, 2, 1, 2), [](PlanConfig& c) { c.dropout = true; }),
      with("dropout_tp2_sp_cp2_pp2", cfg(2, 1, 2, 2, 1),
           [](PlanConfig& c) { c.dropout = true, c.sp = true, c.cp = 2; }),
      // ZeRO-3: parameters held as shards, all-gathered before the forward.
      with("dp2_tp2_zero3", cfg(2, 2, 2, 1, 1), [](PlanConfig& c) { c.zero = 3; }),
      with("zero3_dp2_pp2_mb2_tied_clip", cfg(2, 2, 1, 2, 2),
           [](PlanConfig& c) { c.zero = 3, c.tie_embeddings = true, c.clip = true; }),
      with("zero3_dp2_cp2_tp2_sp", cfg(2, 2, 2, 1, 1),
           [](PlanConfig& c) { c.zero = 3, c.cp = 2, c.sp = true; }),
      with("pp2_mb4_schedule", cfg(2, 1, 1, 2, 4), [](PlanConfig& c) { c.schedule = true; }),
      // Interleaved pipeline: 4 chunks of one layer, chunk k on rank k % 2,
      // the output of chunk 1 sent back to rank 0; its interleaved schedule.
      with("pp2_vpp2_mb2", cfg(4, 1, 1, 2, 2), [](PlanConfig& c) { c.vpp = 2; }),
      with("pp2_vpp2_dp2_tp2_mb2_schedule_tied_clip", cfg(4, 2, 2, 2, 2),
           [](PlanConfig& c) {
             c.vpp = 2, c.schedule = true, c.tie_embeddings = true, c.clip = true;
           }),
      with("pp3_vpp2_mb3_schedule", cfg(6, 1, 1, 3, 3),
           [](PlanConfig& c) { c.vpp = 2, c.schedule = true; }),
      with("everything", cfg(2, 2, 2, 2, 1),
           [](PlanConfig& c) { c.sp = true, c.cp = 2, c.zero = 2, c.tie_embeddings = true; }),
  };
}

class LlamaCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaCorrect, IsEquivalent) {
  const Case& c = GetParam();
  Report r = testing::verify_json(planner::generate_plan("llama3-tiny", c.config), c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Tiny, LlamaCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

// Llama-3 8B's published shapes (hidden 4096, 32 heads, 8 kv heads, ffn
// 14336, vocabulary 128256, sequence 8192) at two layers: only sound shape
// reduction (vocabulary lines indexed by token ids included) makes this fit.
TEST(LlamaPublishedShapes, EightBillionTwoLayersIsEquivalent) {
  PlanConfig c = cfg(2, 2, 2, 2, 2);
  Report r = testing::verify_json(planner::generate_plan("llama3-8b", c), "llama3-8b");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  // Identical stages (the same layer on another dp rank or micro-batch) are
  // solved once.
  EXPECT_LT(r.stats.unique_stages * 2, r.stats.stages);
}

// A wrong-offset bug (gate and up columns swapped on a rank) makes the
// stage's lines relate at contradicting offsets. Those lines keep full size
// and the rest still reduce; at the published widths the stage is then too
// large to prove but not to refute by a concrete counterexample. Before,
// reduction gave up on the whole stage and the bug was only "unknown".
// `bug` on llama3-8b, two layers, tp2: found, first at its own tensor.
void expect_found_at_published_shapes(const std::string& bug) {
  PlanConfig c = cfg(2, 1, 2, 1, 1);
  c.bug = bug;
  const nlohmann::json plan = planner::generate_plan("llama3-8b", c);
  Report r = testing::verify_json(plan, "llama3-8b-" + bug);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings.front().kind, "mismatch");
  EXPECT_EQ(r.findings.front().tensor, plan["meta"].value("bug_first_tensor", ""));
}

TEST(LlamaPublishedShapes, WrongOffsetBugIsFoundAtPublishedShapes) {
  expect_found_at_published_shapes("fused-gate-up-contiguous");
}

// A vocabulary shard that owns one id less than its block: the id it drops
// is one of 128256, the embedding stage keeps the vocabulary line whole and
// is too large to prove, and uniform random ids miss it. Testing aims
// integer inputs at the values next to the stage's constants (the shard
// bounds), which finds it. Before, this was "unknown".
TEST(LlamaPublishedShapes, OffByOneVocabularyBoundIsFoundAtPublishedShapes) {
  expect_found_at_published_shapes("vocab-range-off-by-one");
}

PlanConfig config_for(const std::string& bug) {
  std::optional<PlanConfig> c = testing::llama_config_for_bug(bug);
  if (!c) ADD_FAILURE() << "no test configuration fits bug " << bug;
  return c.value_or(PlanConfig{});
}

std::vector<std::string> bug_names() {
  std::vector<std::string> names;
  for (const planner::BugInfo& b : planner::list_bugs("llama3-tiny")) names.push_back(b.name);
  return names;
}

class LlamaBug : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaBug, IsFoundWhereItFirstShows) {
  PlanConfig c = config_for(GetParam());
  const std::string expected = planner::bug_first_tensor("llama3-tiny", c);
  Report r = testing::verify_json(planner::generate_plan("llama3-tiny", c), GetParam());
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  bool named = false;
  for (const Finding& f : r.findings) named = named || f.tensor == expected;
  EXPECT_TRUE(named) << "no finding names " << expected << "\n" << testing::explain(r);
}

// The contiguous gate/up cut breaks rank 0's up and rank 1's gate, both one
// matmul from the weight; the report lists rank 0's first, so that is the
// tensor the plan must record (it once recorded the gate: a user reading the
// first finding saw another tensor than meta.bug_first_tensor).
TEST(LlamaBugFirstFinding, FusedGateUpContiguousIsRankZerosUp) {
  PlanConfig c = cfg(1, 1, 2, 1, 1);
  c.bug = "fused-gate-up-contiguous";
  const nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  EXPECT_EQ(plan["meta"]["bug_first_tensor"], "l0.up");
  Report r = testing::verify_json(plan, "fused-gate-up-first");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, plan["meta"]["bug_first_tensor"]) << testing::explain(r);
  EXPECT_EQ(r.findings[0].parallel_tensors, std::vector<std::string>{"dp0.tp0.pp0.mb0.l0.up"})
      << testing::explain(r);
}

// Under ZeRO-2 and ZeRO-3 the gradient sync is a reduce-scatter: the missed
// sync leaves each rank its own shard of its own gradient. The plan stays
// valid (it once declared shard-shaped outputs of a whole-gradient
// all-reduce) and the bug is found at the gradient.
TEST(LlamaBugUnderZero, DpGradNotSyncedKeepsTheOwnShard) {
  for (int zero : {2, 3}) {
    PlanConfig c = cfg(2, 2, 1, 1, 1);
    c.zero = zero;
    c.bug = "dp-grad-not-synced";
    const nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
    Report r = testing::verify_json(plan, "dp-grad-not-synced-zero" + std::to_string(zero));
    EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
    ASSERT_FALSE(r.findings.empty()) << zero;
    EXPECT_EQ(r.findings.front().tensor, plan["meta"].value("bug_first_tensor", "")) << zero;
  }
}

INSTANTIATE_TEST_SUITE_P(Catalogue, LlamaBug, ::testing::ValuesIn(bug_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace shardproof
