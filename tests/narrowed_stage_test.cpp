// Narrowed stages (engine/stage/narrowed_stage.h) compute, on every box they
// keep, exactly what the full stage computes there: for every stage of
// generated plans (matmuls, norms, softmax, rotary slices and concats,
// reshapes, transposes, embeddings, all-reduces and all-gathers, optimizer
// steps) and elements at the corners and the middle of each claimed slice,
// the narrowed stage's claim values equal the full stage's at that element,
// on the same leaf values.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/stage/narrowed_stage.h"
#include "engine/stage/stage_claims.h"
#include "planner/planner.h"
#include "tests/family_plans.h"
#include "tests/planner_support.h"

namespace shardproof {
namespace {

// A fixed function per name: a small nonzero rational keyed by the exact
// arguments (values stay small through deep cones).
class HashFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    std::string key = fn;
    for (const Rational& a : args) key += "|" + rational_to_string(a);
    const size_t h = std::hash<std::string>{}(key);
    Rational r(static_cast<long>(h % 19) + 1, static_cast<long>((h >> 8) % 5) + 1);
    r.canonicalize();
    return r;
  }
};

Rational leaf_value(const std::string& full_name, DClass cls) {
  const size_t h = std::hash<std::string>{}(full_name);
  if (cls != DClass::Real) return Rational(static_cast<long>(h % 2));
  Rational r(static_cast<long>(h % 11) - 5, static_cast<long>((h >> 8) % 3) + 1);
  r.canonicalize();
  return r;
}

// The full stage's leaf that narrowed leaf `name` stands for.
std::string full_leaf(const NarrowedStage& n, const Stage& full, const std::string& name) {
  const size_t underscore = name.find('_');
  const int t = std::stoi(name.substr(1, underscore - 1));
  const int64_t i = std::stoll(name.substr(underscore + 1));
  if (t < 0) return name;  // a part absent from the stage: unused by the narrowed elements' checks
  const int src = n.source[t];
  std::vector<int64_t> local = unflatten(n.stage.tensors[t].shape, i);
  for (size_t d = 0; d < local.size(); ++d) local[d] += n.box[t][d].first;
  return name.substr(0, 1) + std::to_string(src) + "_" +
         std::to_string(flat_index(full.tensors[src].shape, local));
}

int64_t checked_stages(const nlohmann::json& plan_json) {
  ParseResult parsed = parse_plan_text(plan_json.dump(), "plan.json", "");
  EXPECT_TRUE(parsed.plan);
  if (!parsed.plan) return 0;
  int64_t checked = 0;
  for (const Stage& full : build_stages(*parsed.plan)) {
    HashFunctions fns;
    ConcreteAlgebra alg(fns);
    StageValues<ConcreteAlgebra> values;
    std::vector<ClaimChecks<Rational>> claims;
    try {
      values = evaluate_stage<ConcreteAlgebra>(
          alg, full, [](const std::string& name, DClass cls) { return leaf_value(name, cls); });
      claims = build_claims(alg, full, values);
    } catch (const EvalError&) {
      continue;  // outside the plan's domain on these values
    }
    Shape extent;
    for (auto [lo, hi] : full.slice) extent.push_back(hi - lo);
    const int64_t count = element_count(extent);
    for (int64_t flat : {int64_t{0}, count / 2, count - 1}) {
      std::vector<int64_t> element = unflatten(extent, flat);
      for (size_t d = 0; d < element.size(); ++d) element[d] += full.slice[d].first;
      std::string why;
      std::optional<NarrowedStage> n = narrow_stage(full, element, 10'000'000, why);
      if (!n) {
        ADD_FAILURE() << full.title << ": " << why;
        continue;
      }
      ConcreteAlgebra nalg(fns);
      auto nvalues =
          evaluate_stage<ConcreteAlgebra>(nalg, n->stage, [&](const std::string& name, DClass cls) {
            return leaf_value(full_leaf(*n, full, name), cls);
          });
      auto nclaims = build_claims(nalg, n->stage, nvalues);
      if (nclaims.size() != claims.size()) {
        ADD_FAILURE() << full.title << ": " << nclaims.size() << " claims, not " << claims.size();
        continue;
      }
      for (size_t c = 0; c < claims.size(); ++c) {
        if (!claims[c].missing.empty()) continue;
        if (nclaims[c].checks.size() != 1) {
          ADD_FAILURE() << full.title << ": " << nclaims[c].checks.size() << " checks";
          continue;
        }
        const ElementCheck<Rational>& want = claims[c].checks[flat];
        EXPECT_EQ(nclaims[c].checks[0].logical, want.logical) << full.title << " " << flat;
        EXPECT_EQ(nclaims[c].checks[0].parallel, want.parallel) << full.title << " " << flat;
      }
    }
    ++checked;
  }
  return checked;
}

TEST(NarrowedStage, ComputesWhatTheFullStageComputesOnMlpStages) {
  EXPECT_GT(
      checked_stages(planner::generate_plan("mlp", testing::mlp_config(2, 2, 2, 1, 2, "adam"))), 0);
}

TEST(NarrowedStage, ComputesWhatTheFullStageComputesOnTransformerStages) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 2, 1, 1);
  c.sp = true;
  EXPECT_GT(checked_stages(planner::generate_plan("llama3-tiny", c)), 0);
}

// A wrong offset (gate and up columns cut as contiguous blocks) reads the
// fused weight at two distant columns, one per side of the claim. The
// weight's elements are independent leaves, so the narrowed stage holds the
// two columns apart: their hull would be most of the weight (29 million
// elements at llama3-8b's widths, too many to replay).
TEST(NarrowedStage, HoldsAWrongOffsetsTwoColumnsApart) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 2, 1, 1);
  c.bug = "fused-gate-up-contiguous";
  const nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  EXPECT_GT(checked_stages(plan), 0);
  ParseResult parsed = parse_plan_text(plan.dump(), "plan.json", "");
  ASSERT_TRUE(parsed.plan);
  int seen = 0;
  for (const Stage& full : build_stages(*parsed.plan)) {
    // Rank 0's up (rank 1's is right: its block ends the fused weight).
    if (full.title.rfind("l0.up[", 0) != 0 || full.slice.back().first != 0) continue;
    std::vector<int64_t> element;
    for (auto [lo, hi] : full.slice) element.push_back(lo);
    std::string why;
    std::optional<NarrowedStage> n = narrow_stage(full, element, 10'000'000, why);
    ASSERT_TRUE(n) << why;
    std::vector<SliceSpec> weight_boxes;
    for (size_t t = 0; t < n->source.size(); ++t)
      if (full.tensors[n->source[t]].name == "l0.wgu") weight_boxes.push_back(n->box[t]);
    ASSERT_EQ(weight_boxes.size(), 2u) << full.title;
    for (const SliceSpec& b : weight_boxes) EXPECT_EQ(b[1].second - b[1].first, 1) << full.title;
    ++seen;
  }
  EXPECT_EQ(seen, 1);
}

// ZeRO's reduce_scatter and MoE's all_to_all are written out by the stage
// builder (slices and an all_reduce or a concat per needed output), which
// narrow; dropout draws with `random` (narrowed to the box it draws).
TEST(NarrowedStage, ComputesWhatTheFullStageComputesOnZeroMoeAndDropoutStages) {
  planner::PlanConfig zero = testing::transformer_config(2, 2, 1, 1, 1);
  zero.zero = 1;
  EXPECT_GT(checked_stages(planner::generate_plan("llama3-tiny", zero)), 0);
  planner::PlanConfig dropout = testing::transformer_config(2, 1, 2, 1, 1);
  dropout.dropout = true;
  EXPECT_GT(checked_stages(planner::generate_plan("llama3-tiny", dropout)), 0);
  planner::PlanConfig moe = testing::transformer_config(2, 2, 1, 1, 1);
  moe.ep = 2;
  EXPECT_GT(checked_stages(planner::generate_plan("moe-tiny", moe)), 0);
}

// ZeRO with tied embeddings whose shards are paired across dp ranks
// (tied-shard-mismatch): an element of one shard reads the other rank's
// rows through a plain claim, two matmuls and two all_reduces, each held as
// two boxes apart (their hull was most of the logits: at llama3-8b, 6.3
// billion elements and no witness).
TEST(NarrowedStage, ComputesWhatTheFullStageComputesWithShardsPairedAcrossRanks) {
  planner::PlanConfig c = testing::transformer_config(2, 2, 1, 2, 1);
  c.tie_embeddings = true;
  c.zero = 1;
  c.bug = "tied-shard-mismatch";
  EXPECT_GT(checked_stages(planner::generate_plan("llama3-tiny", c)), 0);
}

// Per row, the sum over the first 3 of 8 columns of x times a dropout-like
// draw: a split (the 3 columns and the other 5) and a random of 3 columns.
nlohmann::json split_and_draw_plan(int64_t rows) {
  using namespace family_plans;
  json lt = {{"x", tensor({rows, 8})}, {"s", tensor(json::array())}, {"a", tensor({rows, 3})},
             {"b", tensor({rows, 5})}, {"m", tensor({rows, 3})},     {"am", tensor({rows, 3})},
             {"y", tensor({rows})}};
  json lops = {op("a", "split", {"x"}, {"a", "b"}, {{"dim", 1}, {"sizes", {3, 5}}}),
               op("m", "random", {"s"}, {"m"}, {{"shape", {rows, 3}}}),
               op("am", "mul", {"a", "m"}, {"am"}), op("y", "sum", {"am"}, {"y"}, {{"dims", {1}}})};
  json pt = {{"p.a", ptensor({rows, 3})},
             {"p.b", ptensor({rows, 5})},
             {"p.m", ptensor({rows, 3})},
             {"p.am", ptensor({rows, 3})},
             {"p.y", ptensor({rows}, {{"tensor", "y"}})}};
  json pops = {op("p.a", "split", {"p.x"}, {"p.a", "p.b"}, {{"dim", 1}, {"sizes", {3, 5}}}),
               op("p.m", "random", {"p.s"}, {"p.m"}, {{"shape", {rows, 3}}}),
               op("p.am", "mul", {"p.a", "p.m"}, {"p.am"}),
               op("p.y", "sum", {"p.am"}, {"p.y"}, {{"dims", {1}}})};
  return one_rank(lt, {"x", "s"}, lops, {"y"}, pt, {{"p.x", "x"}, {"p.s", "s"}}, pops, {"p.y"});
}

// A split keeps its split dim whole and narrows the others; a draw is made
// at the box, at the same absolute positions. One row's sub-stage holds a
// row of each tensor (before, both ops were whole: 4096 rows of each).
TEST(NarrowedStage, ASplitAndADrawHoldOnlyTheDemandedRows) {
  const nlohmann::json plan = split_and_draw_plan(4096);
  EXPECT_GT(checked_stages(plan), 0);
  ParseResult parsed = parse_plan_text(plan.dump(), "plan.json", "");
  ASSERT_TRUE(parsed.plan);
  const std::vector<Stage> stages = build_stages(*parsed.plan);
  ASSERT_EQ(stages.size(), 1u);
  std::string why;
  std::optional<NarrowedStage> n = narrow_stage(stages[0], {1234}, 10'000'000, why);
  ASSERT_TRUE(n) << why;
  EXPECT_EQ(n->origin, std::vector<int64_t>{1234});
  for (size_t t = 0; t < n->source.size(); ++t) {
    if (n->box[t].empty()) continue;  // the state
    EXPECT_EQ(n->box[t][0], std::make_pair(int64_t{1234}, int64_t{1235}))
        << stages[0].tensors[n->source[t]].name;
  }
  EXPECT_LT(n->stage.element_count(), 100);
}

}  // namespace
}  // namespace shardproof
