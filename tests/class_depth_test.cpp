// Depth in the class verifier (engine/classes/batch_reuse.h): pipeline
// stages that hold the same layers under other numbers are verified once,
// and a bug in one deep layer, one pipeline stage, one micro-batch or one
// rank class still makes its stage's batch differ and is found there.
#include <gtest/gtest.h>

#include <string>

#include "engine/classes/class_verifier.h"
#include "engine/format/plan_parser.h"
#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::by_classes;
using testing::mentions;

// mlp, 16 layers on 8 pipeline stages of 2 (dp2 tp2, 2 micro-batches),
// one program per stage (folded stages: stage_fold_test.cpp).
nlohmann::json deep_mlp() {
  planner::PlanConfig c = testing::mlp_config(16, 2, 2, 8, 2);
  c.batch = 4 * 2 * 2;
  c.compact = true;
  c.fold_stages = false;
  return planner::generate_plan("mlp", c);
}

// The six middle pipeline stages hold the same two layers under other
// numbers: one is verified, the others take its result.
TEST(ClassVerifierDepth, IdenticalPipelineStagesAreVerifiedOnce) {
  ClassRunCounts counts;
  Report r = by_classes(deep_mlp(), &counts);
  ASSERT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(counts.batches, 8);
  EXPECT_EQ(counts.reused, 5);
}

// Every tp rank of layer 11 (pipeline stage 5 of 8) loads another rank's
// shard of its weight: the shards still cover the weight, so the plan is
// valid, but stage 5 is no longer the same as stage 1 up to names. It is
// verified and the bug found; the stages around it are still reused.
TEST(ClassVerifierDepth, OneWrongLayerAtDepthIsFound) {
  nlohmann::json plan = deep_mlp();
  bool changed = false;
  for (nlohmann::json& program : plan["parallel"]["programs"])
    for (nlohmann::json& t : program["tensors"])
      if (t["name"] == "dp{dp}.tp{tp}.pp{pp}.w11") {
        ASSERT_EQ(t["of"]["slice"][0][0], "(tp)*4") << t.dump();
        t["of"]["slice"][0] = {"(1 - tp)*4", "(1 - tp)*4 + 4"};
        changed = true;
      }
  ASSERT_TRUE(changed);
  ClassRunCounts counts;
  Report r = by_classes(plan, &counts);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(mentions(r, "l11")) << testing::explain(r);
  EXPECT_EQ(counts.reused, 4);
}

// llama3-tiny, 12 layers on 6 pipeline stages of 2: the catalogue's bugs
// that hit one pipeline boundary, one micro-batch or one rank class sit in
// pipeline stage 2 or 3, after stage 1, the first of the identical middle
// ones, was verified and kept.
planner::PlanConfig deep_llama(const std::string& bug) {
  planner::PlanConfig c = testing::transformer_config(12, 2, 2, 6, 2);
  c.compact = true;
  c.fold_stages = false;
  c.bug = bug;
  return c;
}

void expect_found_at_depth(const std::string& bug) {
  const planner::PlanConfig c = deep_llama(bug);
  Report r = by_classes(planner::generate_plan("llama3-tiny", c));
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << bug << "\n" << testing::explain(r);
  const std::string first = planner::bug_first_tensor("llama3-tiny", c);
  EXPECT_TRUE(mentions(r, first)) << bug << " not found at " << first << "\n"
                                  << testing::explain(r);
}

TEST(ClassVerifierDepth, TheDeepLlamaIsEquivalentWithItsMiddleStagesReused) {
  ClassRunCounts counts;
  Report r = by_classes(planner::generate_plan("llama3-tiny", deep_llama("")), &counts);
  ASSERT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_GE(counts.reused, 2);
}

TEST(ClassVerifierDepth, AWrongPipelineStageAtDepthIsFound) {
  expect_found_at_depth("pp-send-wrong-tensor");
}

TEST(ClassVerifierDepth, AWrongMicroBatchAtDepthIsFound) {
  expect_found_at_depth("pp-send-wrong-microbatch");
}

TEST(ClassVerifierDepth, AWrongRankClassAtDepthIsFound) {
  expect_found_at_depth("allreduce-mean-not-sum");
}

// One thread (batches prepared in turn) and two (the next batch prepared
// while this one is verified, ordered_prefetch.h) give the same answer and
// reuse the same batches, for a good plan and for one wrong layer.
TEST(ClassVerifierDepth, PreparingAheadChangesNothing) {
  ClassRunCounts one, two;
  Report serial = by_classes(deep_mlp(), &one, 1);
  Report ahead = by_classes(deep_mlp(), &two, 2);
  ASSERT_EQ(serial.verdict, Verdict::Equivalent) << testing::explain(serial);
  ASSERT_EQ(ahead.verdict, Verdict::Equivalent) << testing::explain(ahead);
  EXPECT_EQ(one.batches, two.batches);
  EXPECT_EQ(one.reused, two.reused);
  EXPECT_EQ(serial.stats.stages, ahead.stats.stages);
  EXPECT_EQ(serial.stats.unique_stages, ahead.stats.unique_stages);
}

// Layer 7's query projection (pipeline stage 3 of 6) reads layer 6's weight,
// which the same device holds with the same shape: stage 3's program is
// still stage 2's with other numbers in its names, but not one renaming of
// them (l6.wq where l7.wq belongs). A shortcut that compared programs with
// their numbers left out, instead of numbered consistently, would take
// stage 2's result; the renamed content differs, and the bug is found.
TEST(ClassVerifierDepth, ALayerReadingItsNeighboursWeightIsFound) {
  nlohmann::json plan = planner::generate_plan("llama3-tiny", deep_llama(""));
  bool changed = false;
  for (nlohmann::json& program : plan["parallel"]["programs"])
    for (nlohmann::json& op : program["ops"])
      if (op["name"] == "dp{dp}.tp{tp}.pp3.mb{mb}.l7.q.matmul") {
        ASSERT_EQ(op["in"][1], "dp{dp}.tp{tp}.pp3.l7.wq") << op.dump();
        op["in"][1] = "dp{dp}.tp{tp}.pp3.l6.wq";
        changed = true;
      }
  ASSERT_TRUE(changed);
  ClassRunCounts counts;
  Report r = by_classes(plan, &counts);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(mentions(r, "l7")) << testing::explain(r);
  EXPECT_GE(counts.reused, 1);  // the stages around it are still reused
}

// Layer 8 of 12 on 2 pipeline stages of 6 (dp2 tp2, 2 micro-batches) is
// an interior layer of its stage: neither one of the stage's first two
// layers nor one of its last two, the layers a layer-class shortcut would
// explore (docs/soundness.md, "Batches equal up to names"). Every tp rank
// loads the other rank's half of its wq: the halves still cover the
// weight, so the plan is valid, and only that one layer differs from the
// others. It is found, at that layer's tensor.
TEST(ClassVerifierDepth, AWrongShardInAnInteriorLayerOfADeepStageIsFound) {
  planner::PlanConfig c = testing::transformer_config(12, 2, 2, 2, 2);
  c.compact = true;
  nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  bool changed = false;
  for (nlohmann::json& program : plan["parallel"]["programs"])
    for (nlohmann::json& t : program["tensors"])
      if (t["name"] == "dp{dp}.tp{tp}.pp1.l8.wq") {
        ASSERT_EQ(t["of"]["slice"][1][0], "tp*8") << t.dump();
        t["of"]["slice"][1] = {"(1 - tp)*8", "(1 - tp)*8 + 8"};
        changed = true;
      }
  ASSERT_TRUE(changed);
  Report r = by_classes(plan);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(mentions(r, "l8.")) << testing::explain(r);
  for (const char* other : {"l7.", "l9."})
    EXPECT_FALSE(mentions(r, other)) << other << "\n" << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
