// Stages and shape reduction on the tensor-parallel FFN example: the cut,
// the reduced sizes, and the mapping back to full-size positions.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/format/plan_parser.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/position_plans.h"
#include "tests/test_support.h"

#include <nlohmann/json.hpp>

namespace shardproof {
namespace {

Plan load(const std::string& name) {
  ParseResult r = parse_plan_file(std::string(SHARDPROOF_SOURCE_DIR) + "/examples/" + name);
  EXPECT_TRUE(r.plan.has_value()) << (r.error ? r.error->to_string() : r.io_error);
  return *r.plan;
}

const StageTensor* find(const Stage& s, const std::string& name) {
  for (const StageTensor& t : s.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Stages, TensorParallelFfnIsCutAtEveryClaim) {
  std::vector<Stage> stages = build_stages(load("tp2-ffn.json"));
  std::vector<std::string> titles;
  for (const Stage& s : stages) titles.push_back(s.title);
  EXPECT_EQ(stages.size(), 4u);
  EXPECT_NE(std::find(titles.begin(), titles.end(), "up[0:8, 0:16]"), titles.end());
  EXPECT_NE(std::find(titles.begin(), titles.end(), "out[0:8, 0:16] (2 parts)"), titles.end());
  for (const Stage& s : stages) {
    if (s.title != "out[0:8, 0:16] (2 parts)") continue;
    // The part stage starts from the claimed `up` slices, not from `inp`.
    EXPECT_EQ(find(s, "inp"), nullptr);
    ASSERT_NE(find(s, "tp0.up"), nullptr);
    EXPECT_TRUE(find(s, "tp0.up")->free);
    EXPECT_TRUE(find(s, "up")->free);
    EXPECT_FALSE(find(s, "out")->free);
    EXPECT_EQ(s.members.size(), 2u);
  }
}

TEST(ShapeReduction, KeepsSliceBoundariesWithTwoElementPieces) {
  std::vector<Stage> stages = build_stages(load("tp2-ffn.json"));
  Stage& s = stages.front();  // up[0:8, 0:16]
  ASSERT_EQ(s.title, "up[0:8, 0:16]");
  reduce_stage(s);
  EXPECT_TRUE(s.reduced) << s.reduction_note;
  // up [8, 32] is cut at column 16: two pieces of 2; rows one piece of 2.
  EXPECT_EQ(find(s, "up")->shape, (Shape{2, 4}));
  EXPECT_EQ(find(s, "up")->full_shape, (Shape{8, 32}));
  EXPECT_EQ(find(s, "tp0.up")->shape, (Shape{2, 2}));
  EXPECT_EQ(find(s, "w_up")->shape, (Shape{2, 4}));
  // The second column piece starts at full position 16.
  int up = static_cast<int>(find(s, "up") - &s.tensors[0]);
  EXPECT_EQ(s.full_position[up][1], (std::vector<int64_t>{0, 1, 16, 17}));
}

TEST(ShapeReduction, EveryExampleStageReducesAndRechecks) {
  for (const char* name : {"tp2-ffn.json", "dp2-sgd.json"}) {
    for (Stage& s : build_stages(load(name))) {
      int64_t before = s.element_count();
      reduce_stage(s);
      EXPECT_TRUE(s.reduced) << name << " " << s.title << ": " << s.reduction_note;
      EXPECT_LE(s.element_count(), before);
    }
  }
}

}  // namespace
}  // namespace shardproof

namespace shardproof {
namespace {

// x[2,16] viewed as 4 heads of 4 ([2,4,4]), summed over each head; two
// ranks hold 2 heads each (columns 0:8 and 8:16). With `rank1_sum_dim` != 2
// rank 1 is buggy.
nlohmann::json heads_plan(int rank1_sum_dim) {
  using nlohmann::json;
  auto t = [](json shape) { return json{{"shape", shape}, {"dtype", "f32"}}; };
  json logical = {
      {"tensors", {{"x", t({2, 16})}, {"h", t({2, 4, 4})}, {"y", t({2, 4})}}},
      {"inputs", {"x"}},
      {"ops",
       {{{"op", "reshape"}, {"in", {"x"}}, {"out", {"h"}}, {"attrs", {{"shape", {2, 4, 4}}}}},
        {{"op", "sum"}, {"in", {"h"}}, {"out", {"y"}}, {"attrs", {{"dims", {2}}}}}}},
      {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array();
  for (int r = 0; r < 2; ++r) {
    std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "x"] = {{"shape", {2, 8}},
                        {"dtype", "f32"},
                        {"rank", r},
                        {"of", {{"tensor", "x"}, {"slice", {{0, 2}, {8 * r, 8 * r + 8}}}}}};
    tensors[p + "h"] = {{"shape", {2, 2, 4}}, {"dtype", "f32"}, {"rank", r}};
    tensors[p + "y"] = {{"shape", {2, 2}},
                        {"dtype", "f32"},
                        {"rank", r},
                        {"of", {{"tensor", "y"}, {"slice", {{0, 2}, {2 * r, 2 * r + 2}}}}}};
    ops.push_back({{"op", "reshape"},
                   {"in", {p + "x"}},
                   {"out", {p + "h"}},
                   {"attrs", {{"shape", {2, 2, 4}}}}});
    if (r == 0 || rank1_sum_dim == 2) {
      ops.push_back(
          {{"op", "sum"}, {"in", {p + "h"}}, {"out", {p + "y"}}, {"attrs", {{"dims", {2}}}}});
      continue;
    }
    // The bug: heads regrouped through a [2,4,2] view and reduced by max.
    tensors[p + "t"] = {{"shape", {2, 4, 2}}, {"dtype", "f32"}, {"rank", r}};
    tensors[p + "h2"] = {{"shape", {2, 2, 4}}, {"dtype", "f32"}, {"rank", r}};
    ops.push_back({{"op", "reshape"},
                   {"in", {p + "h"}},
                   {"out", {p + "t"}},
                   {"attrs", {{"shape", {2, 4, 2}}}}});
    ops.push_back({{"op", "reshape"},
                   {"in", {p + "t"}},
                   {"out", {p + "h2"}},
                   {"attrs", {{"shape", {2, 2, 4}}}}});
    ops.push_back(
        {{"op", "max"}, {"in", {p + "h2"}}, {"out", {p + "y"}}, {"attrs", {{"dims", {2}}}}});
  }
  json parallel = {{"world", 2},
                   {"tensors", tensors},
                   {"inputs", {"r0.x", "r1.x"}},
                   {"ops", ops},
                   {"outputs", {"r0.y", "r1.y"}}};
  return {{"format", "shardproof-plan/1"}, {"logical", logical}, {"parallel", parallel}};
}

TEST(ShapeReduction, HeadsReshapeReducesAsAProduct) {
  ParseResult parsed =
      parse_plan_text(heads_plan(2).dump(), "heads.json", std::string(SHARDPROOF_SOURCE_DIR));
  ASSERT_TRUE(parsed.plan) << (parsed.error ? parsed.error->to_string() : parsed.io_error);
  for (Stage& s : build_stages(*parsed.plan)) {
    reduce_stage(s);
    EXPECT_TRUE(s.reduced) << s.reduction_note;
    // 16 = 4 heads x 4; heads keep their cut at 2 (pieces of 2), head dim 4 -> 2.
    EXPECT_EQ(find(s, "x")->shape, (Shape{2, 8}));
    EXPECT_EQ(find(s, "h")->shape, (Shape{2, 4, 2}));
    const StageTensor* x1 = find(s, "r1.x");
    if (x1) {
      EXPECT_EQ(x1->shape, (Shape{2, 4}));
    }
  }
  VerifyOptions options;
  Report good = verify_plan(*parsed.plan, options);
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << report_to_text(good);
  ParseResult bad = parse_plan_text(heads_plan(1).dump(), "heads-bad.json", ".");
  ASSERT_TRUE(bad.plan) << (bad.error ? bad.error->to_string() : bad.io_error);
  Report r = verify_plan(*bad.plan, options);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << report_to_text(r);
}

// ---------------------------------------------------------------- integer positions

namespace positions = testing::positions;

// The stage of `plan` that claims logical tensor `target` (and holds
// tensor `containing`, when given), reduced.
Stage reduced_stage(const nlohmann::json& plan, const std::string& target,
                    const std::string& containing = "") {
  ParseResult parsed = parse_plan_text(plan.dump(), "positions.json", ".");
  EXPECT_TRUE(parsed.plan) << (parsed.error ? parsed.error->to_string() : parsed.io_error);
  for (Stage& s : build_stages(*parsed.plan)) {
    if (s.tensors[s.target].name != target) continue;
    if (!containing.empty() && !find(s, containing)) continue;
    reduce_stage(s);
    return s;
  }
  ADD_FAILURE() << "no stage claims " << target;
  return {};
}

int index_of(const Stage& s, const std::string& name) {
  return static_cast<int>(find(s, name) - &s.tensors[0]);
}

// 2 tokens (one piece of 2) can name 2 rows; with the constant positions 0
// and 25000 (rank 0's and rank 1's first row, compared with and used as the
// masked tokens' row) K = 4, so each 25000-row shard keeps 4 + 2 rows.
TEST(ShapeReduction, VocabParallelEmbeddingReducesTheVocabulary) {
  positions::VocabPlan config;
  nlohmann::json plan = positions::vocab_parallel_embedding(config);
  Stage s = reduced_stage(plan, "out");
  ASSERT_TRUE(s.reduced) << s.reduction_note;
  EXPECT_EQ(find(s, "table")->shape, (Shape{12, 2}));
  EXPECT_EQ(find(s, "r1.table")->shape, (Shape{6, 2}));
  EXPECT_EQ(find(s, "ids")->shape, (Shape{2}));
  // Rank 1's first reduced row is full row 25000; its constants follow.
  int table = index_of(s, "table");
  EXPECT_EQ(s.full_position[table][0][6], 25000);
  EXPECT_EQ(s.full_position[table][0][7], 25001);
  for (const StageOp& op : s.ops) {
    if (op.display_name == "r1.lo" || op.display_name == "r1.sub_lo") {
      EXPECT_EQ(op.attrs.at("value").as_int(), 6) << op.display_name;
    }
  }
  // Token ids map back to full vocabulary positions.
  const std::optional<ValueMap>& ids = s.value_maps.at(index_of(s, "ids"));
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(ids->reduced_hi(), 12);
  EXPECT_EQ(ids->to_full(7), 25001);
  Report r = testing::verify_json(plan, "vocab-embedding");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

// The one-hot backward compares ids only with iota (no constant positions):
// K = 2 tokens, 4 rows per shard. The token line is combined (the
// contraction) but not broadcast: eq(ids[T, 1], iota[1, V]) repeats iota
// along the tokens while ids vary, which is not a count of copies.
TEST(ShapeReduction, OneHotEmbeddingBackwardReducesTheVocabulary) {
  positions::VocabPlan config;
  nlohmann::json plan = positions::vocab_parallel_onehot_backward(config);
  for (const char* iota : {"r0.iota", "r1.iota"}) {  // one stage per rank's rows
    Stage s = reduced_stage(plan, "grad", iota);
    ASSERT_TRUE(s.reduced) << s.reduction_note;
    EXPECT_EQ(find(s, "grad")->shape, (Shape{8, 2}));
    EXPECT_EQ(find(s, "onehot")->shape, (Shape{2, 8}));
    EXPECT_EQ(find(s, iota)->shape, (Shape{1, 4}));
  }
  Report r = testing::verify_json(plan, "vocab-onehot");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(ShapeReduction, VocabParallelTargetLogitsReduceTheVocabulary) {
  positions::VocabPlan config;
  nlohmann::json plan = positions::vocab_parallel_target_logits(config);
  Stage s = reduced_stage(plan, "target");
  ASSERT_TRUE(s.reduced) << s.reduction_note;
  EXPECT_EQ(find(s, "logits")->shape, (Shape{2, 12}));
  EXPECT_EQ(find(s, "r0.logits")->shape, (Shape{2, 6}));
  Report r = testing::verify_json(plan, "vocab-target");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

// A constant that is neither a boundary nor outside the line cannot be
// mapped: the vocabulary keeps its full size (and the stage is refuted
// there, see Soundness.VocabShardOffsetMustBeABoundary).
TEST(ShapeReduction, NonBoundaryPositionConstantKeepsTheLine) {
  positions::VocabPlan config;
  config.vocab = 64;
  config.offset_error = 1;
  Stage s = reduced_stage(positions::vocab_parallel_embedding(config), "out");
  EXPECT_EQ(find(s, "table")->shape, (Shape{64, 2}));
  EXPECT_EQ(find(s, "ids")->shape, (Shape{2}));  // the token line still reduces
}

}  // namespace
}  // namespace shardproof
