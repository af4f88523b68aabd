// The two element algebras: exact concrete arithmetic, the pseudo-random
// function table, and the Z3 encoding with its side conditions.
#include <gtest/gtest.h>

#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"

namespace shardproof {
namespace {

Rational q(long n, unsigned long d = 1) {
  Rational r(n, d);
  r.canonicalize();
  return r;
}

TEST(AlgebraConcrete, ArithmeticIsExact) {
  PseudoRandomFunctions fns;
  ConcreteAlgebra alg(fns);
  EXPECT_EQ(alg.add(q(1, 3), q(1, 6)), q(1, 2));
  EXPECT_EQ(alg.div(q(1), q(3)), q(1, 3));
  EXPECT_THROW(alg.div(q(1), q(0)), EvalError);
  EXPECT_EQ(alg.maximum(q(-1), q(2)), q(2));
  EXPECT_EQ(alg.minimum(q(-1), q(2)), q(-1));
  EXPECT_EQ(alg.sum({}), q(0));
  EXPECT_EQ(alg.sum({q(1), q(2), q(1, 2)}), q(7, 2));
  EXPECT_EQ(alg.lt(q(1), q(2)), q(1));
  EXPECT_EQ(alg.ge(q(1), q(2)), q(0));
  EXPECT_EQ(alg.eq(q(2, 4), q(1, 2)), q(1));
  EXPECT_EQ(alg.select(q(0), q(5), q(7)), q(7));
  EXPECT_EQ(alg.constant(q(3), DClass::Bool), q(1));
}

TEST(AlgebraConcrete, CastsAndPick) {
  PseudoRandomFunctions fns;
  ConcreteAlgebra alg(fns);
  EXPECT_EQ(alg.cast(q(-3, 2), DClass::Real, DClass::Int), q(-2));  // floor, not truncation
  EXPECT_EQ(alg.cast(q(7, 2), DClass::Real, DClass::Int), q(3));
  EXPECT_EQ(alg.cast(q(-4), DClass::Real, DClass::Int), q(-4));
  EXPECT_EQ(alg.cast(q(1, 2), DClass::Real, DClass::Bool), q(1));
  EXPECT_EQ(alg.cast(q(0), DClass::Int, DClass::Bool), q(0));
  EXPECT_EQ(alg.cast(q(1), DClass::Bool, DClass::Real), q(1));
  EXPECT_EQ(alg.pick(q(1), {q(10), q(20)}), q(20));
  EXPECT_THROW(alg.pick(q(2), {q(10), q(20)}), EvalError);
  EXPECT_THROW(alg.pick(q(-1), {q(10), q(20)}), EvalError);
  EXPECT_THROW(alg.pick(q(1, 2), {q(10), q(20)}), EvalError);
}

// The pseudo-random functions square their arguments: exact values double
// in size at every transcendental op. A bounded algebra (random testing)
// stops a deep chain at its budget instead of computing for minutes.
TEST(AlgebraConcrete, ABitBudgetStopsValuesThatGrowPastIt) {
  PseudoRandomFunctions fns;
  ConcreteAlgebra bounded(fns, 1 << 10), unbounded(fns);
  Rational v = q(3, 2), w = v;
  int steps = 0;
  EXPECT_THROW(for (; steps < 64; ++steps) v = bounded.call("exp", {v}), EvalError);
  EXPECT_GT(steps, 3);
  EXPECT_LT(steps, 12);  // sizes double: the budget is reached within a few steps
  for (int i = 0; i < 4; ++i) w = unbounded.call("exp", {w});  // no budget: exact, however big
  EXPECT_EQ(bounded.add(q(1, 3), q(1, 6)), q(1, 2));           // small values pass untouched
}

TEST(AlgebraConcrete, PseudoRandomFunctionsAreFixedDistinctAndUseEveryArgument) {
  PseudoRandomFunctions f, g;
  EXPECT_EQ(f.call("exp", {q(3)}), g.call("exp", {q(3)}));  // deterministic
  EXPECT_NE(f.call("exp", {q(3)}), f.call("log", {q(3)}));
  EXPECT_NE(f.call("exp", {q(3)}), f.call(map_function_key("exp"), {q(3)}));
  EXPECT_NE(f.call("exp", {q(3)}), f.call("exp", {q(4)}));
  // Not additive: exp(a + b) != exp(a) * exp(b) in general.
  EXPECT_NE(f.call("exp", {q(3)}), f.call("exp", {q(1)}) * f.call("exp", {q(2)}));
  for (int changed = 0; changed < 3; ++changed) {
    std::vector<Rational> args = {q(1), q(2), q(3)}, other = args;
    other[changed] += 1;
    EXPECT_NE(f.call("map:h", args), f.call("map:h", other)) << "argument " << changed;
  }
  EXPECT_EQ(map_function_key("gelu'"), "map:gelu'");
}

TEST(AlgebraZ3, DivisionRecordsNonzeroAssumption) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  z3::expr x = alg.variable("x", DClass::Real), y = alg.variable("y", DClass::Real);
  alg.div(x, alg.constant(q(3), DClass::Real));
  EXPECT_TRUE(alg.assumptions().empty());
  alg.div(x, alg.constant(q(-1, 2), DClass::Real));
  EXPECT_TRUE(alg.assumptions().empty());
  alg.div(x, y);
  ASSERT_EQ(alg.assumptions().size(), 1u);
  z3::solver s(ctx);
  s.add(alg.assumptions()[0]);
  s.add(y == 0);
  EXPECT_EQ(s.check(), z3::unsat);
  alg.div(x, alg.constant(q(0), DClass::Real));  // a zero numeral is not exempt
  EXPECT_EQ(alg.assumptions().size(), 2u);
}

// a / a is 1 where a is not 0, and a is still assumed nonzero: a plan that
// divides by a zero value is no more provable than before.
TEST(AlgebraZ3, ATermOverItselfIsOneAndStillAssumedNonzero) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  z3::expr x = alg.variable("x", DClass::Real), y = alg.variable("y", DClass::Real);
  z3::expr e = alg.call("exp", {x}) * y;
  z3::expr one = alg.div(e, e);
  EXPECT_TRUE(one.is_numeral());
  EXPECT_EQ(one.get_decimal_string(0), "1");
  ASSERT_EQ(alg.assumptions().size(), 1u);
  z3::solver s(ctx);
  s.add(alg.assumptions()[0]);
  s.add(y == 0);
  EXPECT_EQ(s.check(), z3::unsat);
  // Only the same term: another term that is equal in value stays a quotient.
  z3::expr q2 = alg.div(e, alg.call("exp", {x}) * y + 0);
  EXPECT_FALSE(q2.is_numeral());
}

TEST(AlgebraZ3, SortsCastsAndExtrema) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  EXPECT_TRUE(alg.variable("r", DClass::Real).is_real());
  EXPECT_TRUE(alg.variable("i", DClass::Int).is_int());
  EXPECT_TRUE(alg.variable("b", DClass::Bool).is_bool());
  EXPECT_TRUE(alg.constant(q(1, 3), DClass::Real).is_real());
  auto value = [&](const z3::expr& e) { return e.simplify().to_string(); };
  EXPECT_EQ(value(alg.cast(alg.constant(q(-3, 2), DClass::Real), DClass::Real, DClass::Int)),
            "(- 2)");
  EXPECT_EQ(value(alg.cast(alg.constant(q(2), DClass::Int), DClass::Int, DClass::Real)), "2.0");
  EXPECT_EQ(value(alg.cast(alg.constant(q(1), DClass::Bool), DClass::Bool, DClass::Int)), "1");
  EXPECT_EQ(value(alg.cast(alg.constant(q(0), DClass::Real), DClass::Real, DClass::Bool)), "false");
  EXPECT_TRUE(alg.cast(alg.variable("i2", DClass::Int), DClass::Int, DClass::Real).is_real());
  z3::expr a = alg.variable("a", DClass::Real), b = alg.variable("b2", DClass::Real);
  z3::solver s(ctx);
  s.add(!(alg.maximum(a, b) >= a && alg.maximum(a, b) >= b &&
          (alg.maximum(a, b) == a || alg.maximum(a, b) == b) && alg.minimum(a, b) <= a));
  EXPECT_EQ(s.check(), z3::unsat);
  EXPECT_EQ(value(alg.sum({alg.constant(q(1), DClass::Real), alg.constant(q(1, 2), DClass::Real)})),
            "(/ 3.0 2.0)");
}

// An all-reduce(max) of per-shard row maxima is the logical row's maximum
// term itself (no case splits left for Z3), and the flattened form is still
// the maximum: a shard left out is a different term and a model tells them
// apart; mixed extremes (a clamp) are not flattened across max and min.
TEST(AlgebraZ3, NestedExtremaAreOneCanonicalTerm) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  std::vector<z3::expr> x;
  for (int i = 0; i < 8; ++i) x.push_back(alg.variable("x" + std::to_string(i), DClass::Real));
  const z3::expr row = alg.maximum_of(x);
  const z3::expr shard0 = alg.maximum_of({x[4], x[5], x[6], x[7]});
  const z3::expr shard1 = alg.maximum_of({x[3], x[2], x[1], x[0]});
  EXPECT_TRUE(z3::eq(alg.maximum_of({shard0, shard1}), row));
  EXPECT_TRUE(z3::eq(alg.maximum(shard1, alg.maximum(shard0, x[2])), row));  // idempotent
  const z3::expr missing = alg.maximum_of({shard0, alg.maximum_of({x[0], x[1], x[2]})});
  EXPECT_FALSE(z3::eq(missing, row));
  z3::solver s(ctx);
  s.add(missing != row);
  EXPECT_EQ(s.check(), z3::sat);
  z3::solver is_max(ctx);  // the canonical term is still max: >= every leaf, equal to one
  z3::expr_vector bounds(ctx), hits(ctx);
  for (const z3::expr& v : x) bounds.push_back(row >= v), hits.push_back(row == v);
  is_max.add(!(z3::mk_and(bounds) && z3::mk_or(hits)));
  EXPECT_EQ(is_max.check(), z3::unsat);
  const z3::expr clamp = alg.minimum(alg.maximum(x[0], x[1]), x[2]);
  EXPECT_FALSE(z3::eq(clamp, alg.minimum_of({x[0], x[1], x[2]})));
  EXPECT_FALSE(z3::eq(clamp, alg.maximum_of({x[0], x[1], x[2]})));
}

// A shared context (one per solver thread) holds terms from earlier stages,
// so sorting leaves by id follows creation order across stages: leaves that
// are one term once simplified (a masked score, built from the logical
// graph's iota and from a rank's offset iota) must make one maximum,
// whatever order they were built in (a causal-attention row was UNKNOWN on
// one solver thread and trivial on two).
TEST(AlgebraZ3, ExtremaOfLeavesEqualOnceSimplifiedDoNotDependOnCreationOrder) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  const z3::expr score = alg.variable("s", DClass::Real);
  const z3::expr other = alg.variable("t", DClass::Real);
  const z3::expr neg = ctx.real_val(-10000);
  auto masked = [&](const z3::expr& keep) { return z3::ite(keep, score, neg); };
  const z3::expr logical = masked(ctx.int_val(3) >= ctx.int_val(1));
  const z3::expr y = alg.variable("y", DClass::Real);  // made between the two
  const z3::expr parallel = masked(ctx.int_val(1) <= ctx.int_val(1) + ctx.int_val(2));
  EXPECT_TRUE(z3::eq(alg.maximum(logical, y), alg.maximum(y, parallel)));
  EXPECT_TRUE(z3::eq(alg.minimum_of({y, logical, other}), alg.minimum_of({other, parallel, y})));
  const z3::expr masked_out = masked(ctx.int_val(1) >= ctx.int_val(3));
  EXPECT_FALSE(z3::eq(alg.maximum(logical, y), alg.maximum(masked_out, y)));
}

TEST(AlgebraZ3, UninterpretedFunctionsAreDeclaredOncePerName) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  z3::expr x = alg.variable("x", DClass::Real);
  z3::expr e1 = alg.call("exp", {x});
  z3::expr e2 = alg.call("exp", {x});
  EXPECT_TRUE(z3::eq(e1, e2));
  alg.call(map_function_key("exp"), {x, x});
  ASSERT_EQ(alg.functions().size(), 2u);
  EXPECT_EQ(alg.functions().at("exp").name().str(), "uf!exp");
  EXPECT_EQ(alg.functions().at("map:exp").arity(), 2u);
  EXPECT_THROW(alg.call("exp", {x, x}), std::invalid_argument);
  // Integer arguments are lifted to reals.
  EXPECT_TRUE(alg.call("map:k", {alg.variable("n", DClass::Int)}).is_real());
  // exp and map:exp are different functions: their equality is not provable.
  z3::solver s(ctx);
  s.add(alg.call("exp", {x}) != alg.call("map:exp", {x, x}));
  EXPECT_EQ(s.check(), z3::sat);
}

TEST(AlgebraZ3, PickSideConditions) {
  z3::context ctx;
  Z3Algebra alg(ctx);
  std::vector<z3::expr> c = {alg.variable("c0", DClass::Real), alg.variable("c1", DClass::Real),
                             alg.variable("c2", DClass::Real)};
  // A numeral in range: the candidate itself, no condition.
  EXPECT_TRUE(z3::eq(alg.pick(alg.constant(q(1), DClass::Int), c), c[1]));
  EXPECT_TRUE(alg.assumptions().empty());
  EXPECT_TRUE(alg.obligations().empty());
  // A numeral out of range: an obligation that cannot hold.
  alg.pick(alg.constant(q(3), DClass::Int), c);
  ASSERT_EQ(alg.obligations().size(), 1u);
  EXPECT_TRUE(alg.obligations()[0].is_false());
  // A trusted input index: assumption; a computed one: obligation.
  z3::expr id = alg.variable("id", DClass::Int);
  alg.trust_as_index(id);
  z3::expr picked = alg.pick(id, c);
  EXPECT_EQ(alg.assumptions().size(), 1u);
  EXPECT_EQ(alg.obligations().size(), 1u);
  alg.pick(id + 1, c);
  EXPECT_EQ(alg.assumptions().size(), 1u);
  ASSERT_EQ(alg.obligations().size(), 2u);
  z3::solver s(ctx);
  s.add(alg.assumptions()[0]);
  s.add(
      !((id == 0 && picked == c[0]) || (id == 1 && picked == c[1]) || (id == 2 && picked == c[2])));
  EXPECT_EQ(s.check(), z3::unsat);
  z3::solver t(ctx);
  t.add(alg.assumptions()[0]);
  t.add(!alg.obligations()[1]);  // id + 1 may be 3
  EXPECT_EQ(t.check(), z3::sat);
}

}  // namespace
}  // namespace shardproof
