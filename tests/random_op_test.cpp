// The `random` op (engine/ops/random.cpp): a shard drawn at its slice's
// offset holds exactly the logical draw's values there; a draw at another
// offset or from another state does not; bad attributes are rejected; and
// the proof decides both (plans in which tp ranks must share, or must not
// share, a dropout mask).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ops/algebra.h"
#include "engine/ops/op_def.h"
#include "engine/ops/op_registry.h"
#include "planner/planner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

AttrMap attrs(Shape shape, Shape full, Shape offset) {
  return {{"shape", Attr::of_int_list(shape)},
          {"full", Attr::of_int_list(full)},
          {"offset", Attr::of_int_list(offset)}};
}

std::vector<Rational> draw(const AttrMap& a, const Rational& state) {
  const OpDef* def = OpRegistry::instance().find("random");
  EXPECT_NE(def, nullptr);
  std::vector<TensorInfo> out;
  EXPECT_EQ(def->infer(a, {{{}, DType::F32}}, 1, out), "");
  OpCall call;
  call.op = "random";
  call.attrs = a;
  call.full_in_shapes = {{}};
  call.out_shapes = {out.at(0).shape};
  call.out_dtypes = {DType::F32};
  Tensor<Rational> s;
  s.shape = {};
  s.cls = DClass::Real;
  s.data = {state};
  PseudoRandomFunctions fns;
  ConcreteAlgebra alg(fns);
  return def->eval(alg, call, {s}).at(0).data;
}

TEST(RandomOp, AShardAtItsOffsetIsTheLogicalSlice) {
  const std::vector<Rational> whole = draw(attrs({2, 4}, {2, 4}, {0, 0}), 7);
  const std::vector<Rational> right = draw(attrs({2, 2}, {2, 4}, {0, 2}), 7);
  ASSERT_EQ(right.size(), 4u);
  EXPECT_EQ(right[0], whole[2]);
  EXPECT_EQ(right[1], whole[3]);
  EXPECT_EQ(right[2], whole[6]);
  EXPECT_EQ(right[3], whole[7]);
  // The left half drawn again: the positions, not the shard, decide.
  const std::vector<Rational> left = draw(attrs({2, 2}, {2, 4}, {0, 0}), 7);
  EXPECT_NE(left, right);
  // Another state draws other values at the same positions.
  EXPECT_NE(draw(attrs({2, 4}, {2, 4}, {0, 0}), 8), whole);
}

TEST(RandomOp, RejectsBadAttributes) {
  const OpDef* def = OpRegistry::instance().find("random");
  ASSERT_NE(def, nullptr);
  std::vector<TensorInfo> out;
  EXPECT_NE(def->infer(attrs({2, 3}, {2, 4}, {0, 2}), {{{}, DType::F32}}, 1, out), "");
  EXPECT_NE(def->infer(attrs({2}, {2, 4}, {0, 0}), {{{}, DType::F32}}, 1, out), "");
  EXPECT_NE(def->infer(attrs({2}, {2}, {0}), {{{2}, DType::F32}}, 1, out), "");
  EXPECT_NE(def->infer(attrs({2}, {2}, {0}), {{{}, DType::I64}}, 1, out), "");
  EXPECT_EQ(def->infer(attrs({2}, {4}, {2}), {{{}, DType::F32}}, 1, out), "");
}

Report verify(planner::PlanConfig c, const std::string& label) {
  return testing::verify_json(planner::generate_plan("llama3-tiny", c), label);
}

// tp ranks hold the MLP output whole: they must draw one mask. Under
// sequence parallelism each holds a piece: they must draw at their positions.
TEST(RandomOp, DropoutMasksAreProvenPerTensorParallelLayout) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 2, 1, 1);
  c.dropout = true;
  EXPECT_EQ(verify(c, "dropout-tp2").verdict, Verdict::Equivalent);
  c.bug = "dropout-rng-replicated-differs";
  Report r = verify(c, "dropout-tp2-forked");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "l0.mlp.mask") << testing::explain(r);
  c.sp = true;
  c.bug = "dropout-rng-sharded-same";
  r = verify(c, "dropout-sp-same");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "l0.mlp.mask") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
