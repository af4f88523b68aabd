// Issue 20's completeness target at the families' published shapes (a few
// layers; bench/published.sh measures more): correct plans are equivalent
// and catalogue bugs are found, where each of these was unknown before.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using planner::PlanConfig;
using testing::explain;

// Llama-3 8B at tp 16 has 8 kv heads, so two tp ranks share each: a rank's
// slice of the expanded K (32 heads = 8 kv heads x 4 query heads each) is 2
// heads, a boundary inside a kv head's block of 4. That boundary cuts the
// reshape's product line: before, reduction gave up on the whole stage (90
// million elements, unknown); now only the heads line keeps its full size.
TEST(PublishedShapes, TpAboveTheKvHeadsIsEquivalent) {
  const PlanConfig c = testing::transformer_config(2, 1, 16, 1, 1);
  Report r = testing::verify_json(planner::generate_plan("llama3-8b", c), "llama3-8b-tp16");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << explain(r);
}

void expect_found(const std::string& model, PlanConfig c, const std::string& bug) {
  c.bug = bug;
  const nlohmann::json plan = planner::generate_plan(model, c);
  Report r = testing::verify_json(plan, model + "-" + bug);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
  bool named = false;
  for (const Finding& f : r.findings)
    named = named || (f.kind == "mismatch" && f.tensor == plan["meta"]["bug_first_tensor"]);
  EXPECT_TRUE(named) << explain(r);
}

// The kv head shared by two ranks taken wrongly: the heads line kept whole
// shows it (the trap of reducing a line whose boundary cuts a kv group).
TEST(PublishedShapes, KvHeadsNotReplicatedIsFoundAtTp16) {
  expect_found("llama3-8b", testing::transformer_config(2, 1, 16, 1, 1), "kv-heads-not-replicated");
}

// The sequence-parallel all-gather along the hidden dim, viewed as
// [batch, seq, hidden]: a reshape that mixes every line, so the stage keeps
// 33 million elements, too many to prove or test whole. Tested at full size
// on what single elements need (a reshape narrowed to the flat run of an
// element): found. Before: unknown.
TEST(PublishedShapes, SpAllGatherDimIsFoundAtPublishedShapes) {
  PlanConfig c = testing::transformer_config(2, 1, 2, 1, 1);
  c.sp = true;
  expect_found("llama3-8b", c, "sp-allgather-dim");
}

// The tied table's two gradients left unsynced: the finding's element needs
// a column of the embedding backward, which a reshape keeping its trailing
// dims narrows to a column; the flat-run rule alone would read 8.6 billion
// elements (unknown). Guards the choice of the smaller rule.
TEST(PublishedShapes, TiedEmbeddingNotSyncedIsFoundAtPublishedShapes) {
  PlanConfig c = testing::transformer_config(2, 1, 1, 2, 1);
  c.tie_embeddings = true;
  expect_found("llama3-8b", c, "tied-embedding-not-synced");
}

// Each vocabulary shard's local maximum where the all-reduced one is due:
// random values at full size give both shards the same maximum; the reduced
// counterexample lifted to full size does not. Before: unknown.
TEST(PublishedShapes, CeMaxNotReducedIsFoundByTheLiftedCounterexample) {
  expect_found("llama3-8b", testing::transformer_config(2, 2, 2, 1, 1), "ce-max-not-reduced");
}

// The wq gradient all-reduced over the tp group: each rank's sum pairs its
// own columns with the other tp rank's, so a finding's element reads the
// logical gradient (a matmul over 16,384 tokens) at two columns 2,048 apart.
// Their hull was 2,049 columns, 67 million elements, and the finding had no
// full-size witness (unknown); the matmul is now narrowed once per column.
TEST(PublishedShapes, DpGradOnTpGroupIsFoundAtPublishedShapes) {
  expect_found("llama3-8b", testing::transformer_config(2, 2, 2, 1, 1), "dp-grad-on-tp-group");
}

// Gradient clipping: the norm's sum of squares is one scalar whose stage
// holds every parameter's squared gradient (5.7 billion elements at 2
// layers), too many for any replay at full size, so each of these bugs was
// unknown. Their reduced counterexamples lifted with zeros are exact full-
// size witnesses (engine/prove/zero_padding.h).
TEST(PublishedShapes, ClipNormBugsAreFoundThroughZeroPaddedWitnesses) {
  PlanConfig c = testing::transformer_config(2, 2, 2, 2, 2);
  c.clip = true;
  Report r = testing::verify_json(planner::generate_plan("llama3-8b", c), "llama3-8b-clip");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << explain(r);
  for (const char* bug : {"clip-norm-local-shard", "clip-norm-replicated-counted-tp",
                          "clip-norm-missing-pp", "clip-before-reduce"})
    expect_found("llama3-8b", c, bug);
}

// ZeRO with tied embeddings on two pipeline stages, the first stage's table
// gradient shard summed with another dp rank's shard on the last: the stage
// keeps the vocabulary whole (two offsets on one line) and is too large to
// prove; an element's sub-stage held the hull of the two ranks' rows of the
// logits (6.3 billion elements: unknown) and now holds them apart.
TEST(PublishedShapes, TiedShardMismatchIsFoundAtPublishedShapes) {
  PlanConfig c = testing::transformer_config(2, 2, 1, 2, 1);
  c.tie_embeddings = true;
  c.zero = 1;
  expect_found("llama3-8b", c, "tied-shard-mismatch");
}

}  // namespace
}  // namespace shardproof
