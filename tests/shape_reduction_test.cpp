// Stages and shape reduction on the tensor-parallel FFN example: the cut,
// the reduced sizes, and the mapping back to full-size positions.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/plan_parser.h"
#include "engine/shape_reduction.h"
#include "engine/stage.h"
#include "engine/verifier.h"

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
    if (x1) EXPECT_EQ(x1->shape, (Shape{2, 4}));
  }
  VerifyOptions options;
  Report good = verify_plan(*parsed.plan, options);
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << report_to_text(good);
  ParseResult bad = parse_plan_text(heads_plan(1).dump(), "heads-bad.json", ".");
  ASSERT_TRUE(bad.plan) << (bad.error ? bad.error->to_string() : bad.io_error);
  Report r = verify_plan(*bad.plan, options);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << report_to_text(r);
}

}  // namespace
}  // namespace shardproof
