// The prover's smaller queries (engine/prove/independent_parts.h) and the Z3
// algebra's linear form of an indicator product (engine/ops/z3_algebra.cpp).
#include <gtest/gtest.h>

#include <z3++.h>

#include "engine/ops/algebra.h"
#include "engine/prove/independent_parts.h"

namespace shardproof {
namespace {

bool holds(z3::context& ctx, const z3::expr& claim) {
  z3::solver s(ctx);
  s.add(!claim);
  return s.check() == z3::unsat;
}

bool has_nonlinear_product(const z3::expr& e) {
  if (!e.is_app()) return false;
  if (e.decl().decl_kind() == Z3_OP_MUL) {
    int symbolic = 0;
    for (unsigned i = 0; i < e.num_args(); ++i) symbolic += e.arg(i).is_numeral() ? 0 : 1;
    if (symbolic > 1) return true;
  }
  for (unsigned i = 0; i < e.num_args(); ++i)
    if (has_nonlinear_product(e.arg(i))) return true;
  return false;
}

TEST(AlgebraZ3, AnIndicatorTimesAValueIsLinearAndEqual) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  const z3::expr x = ctx.real_const("x"), c = ctx.bool_const("c");
  const z3::expr indicator = alg.cast(c, DClass::Bool, DClass::Real);
  for (const z3::expr& product : {alg.mul(x, indicator), alg.mul(indicator, x)}) {
    EXPECT_FALSE(has_nonlinear_product(product)) << product;
    EXPECT_TRUE(holds(ctx, product == x * z3::ite(c, ctx.real_val(1), ctx.real_val(0))));
  }
  // Two values multiply as before: nothing to linearise.
  const z3::expr y = ctx.real_const("y");
  EXPECT_TRUE(has_nonlinear_product(alg.mul(x, y)));
}

TEST(IndependentParts, SplitsASumBySharedVariables) {
  z3::context ctx;
  const z3::expr a = ctx.real_const("a"), b = ctx.real_const("b"), c = ctx.real_const("c"),
                 d = ctx.real_const("d");
  IndependentParts parts(ctx, {});
  // a*2 + b and b*3 share b; c - d stands alone; 5 has no variable.
  z3::expr_vector terms(ctx);
  for (const z3::expr& t : {a * 2, c - d, b, b * 3, ctx.real_val(5)}) terms.push_back(t);
  const z3::expr sum = z3::sum(terms);
  const std::vector<z3::expr> got = parts.split(sum);
  ASSERT_EQ(got.size(), 3u);
  // The parts add up to the whole.
  z3::expr_vector all(ctx);
  for (const z3::expr& p : got) all.push_back(p);
  EXPECT_TRUE(holds(ctx, z3::sum(all) == sum));
  // One term: nothing to split.
  EXPECT_EQ(parts.split(a * b).size(), 1u);
}

TEST(IndependentParts, KeepsOnlyTheSideConditionsConnectedToAQuery) {
  z3::context ctx;
  const z3::expr a = ctx.real_const("a"), b = ctx.real_const("b"), c = ctx.real_const("c"),
                 d = ctx.real_const("d");
  // a -- b through the first condition, b -- c through the second; d apart.
  IndependentParts parts(ctx, {a + b != 0, b - c != 0, d != 0});
  const std::vector<z3::expr> relevant = parts.relevant(a > 1);
  ASSERT_EQ(relevant.size(), 2u);  // transitively: a, then b, then c
  EXPECT_TRUE(z3::eq(relevant[0], a + b != 0));
  EXPECT_TRUE(z3::eq(relevant[1], b - c != 0));
  EXPECT_TRUE(parts.relevant(ctx.real_const("e") > 0).empty());
}

}  // namespace
}  // namespace shardproof
