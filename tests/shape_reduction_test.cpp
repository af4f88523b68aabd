// Stages and shape reduction on the tensor-parallel FFN example: the cut,
// the reduced sizes, and the mapping back to full-size positions.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/plan_parser.h"
#include "engine/shape_reduction.h"
#include "engine/stage.h"

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
