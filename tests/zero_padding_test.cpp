// Zero-padded witnesses (engine/prove/zero_padding.h, docs/soundness.md
// section 5.1): a reduced counterexample lifted with zeros off the kept
// elements is a full-size witness when every op keeps those zeros, with no
// full-size run. The rule is checked against the interpreter (on every
// stage of generated plans it accepts, the full stage on the zero lift holds
// the reduced values at every kept position, and zeros where it says so),
// then on plans: a global sum of squares far too large to replay (a
// gradient clip's norm) is found, and a sum of values that are not zero off
// the kept elements (an uninterpreted function of 0) is not taken as a
// witness.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/prove/zero_padding.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage_eval.h"
#include "planner/planner.h"
#include "tests/family_plans.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using namespace family_plans;
using testing::explain;
using testing::verify_json;

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

Rational leaf_value(const std::string& name, DClass cls) {
  const size_t h = std::hash<std::string>{}(name);
  if (cls == DClass::Int) return Rational(static_cast<long>(h % 2));
  if (cls != DClass::Real) return Rational(static_cast<long>(h % 2));
  Rational r(static_cast<long>(h % 11) - 5, static_cast<long>((h >> 8) % 3) + 1);
  r.canonicalize();
  return r;
}

// The reduced position of full position q along one dim (nullopt when q is
// not kept), and the kept position at or before q (where a non-real leaf
// repeats its piece's value).
std::optional<int64_t> kept(const std::vector<int64_t>& positions, int64_t q) {
  if (positions.empty()) return q;
  auto it = std::lower_bound(positions.begin(), positions.end(), q);
  if (it == positions.end() || *it != q) return std::nullopt;
  return it - positions.begin();
}
int64_t at_or_before(const std::vector<int64_t>& positions, int64_t q) {
  if (positions.empty()) return q;
  auto it = std::upper_bound(positions.begin(), positions.end(), q);
  return it == positions.begin() ? 0 : (it - positions.begin()) - 1;
}
const std::vector<int64_t>& positions_of(const Stage& reduced, size_t t, size_t d) {
  static const std::vector<int64_t> none;
  return reduced.full_position.empty() ? none : reduced.full_position[t][d];
}

struct Counts {
  int64_t accepted = 0, refused = 0;
};

// For each stage of the plan that the rule accepts: the full stage on the
// zero lift of leaf_value's reduced values equals the reduced stage at every
// kept position of every tensor, is 0 off the kept positions of each dim the
// rule marks, and stays inside the plan's domain.
Counts check_stages(const nlohmann::json& plan_json) {
  Counts counts;
  ParseResult parsed = parse_plan_text(plan_json.dump(), "plan.json", "");
  EXPECT_TRUE(parsed.plan);
  if (!parsed.plan) return counts;
  for (const Stage& full : build_stages(*parsed.plan)) {
    Stage reduced = full;
    reduce_stage(reduced);
    if (!reduced.reduced || reduced.full_position.empty()) continue;
    const ZeroPadding padding = zero_padding(full, reduced);
    if (!padding.refusal.empty()) {
      ++counts.refused;
      continue;
    }
    HashFunctions fns;
    ConcreteAlgebra ralg(fns);
    StageValues<ConcreteAlgebra> rvalues;
    try {
      rvalues = evaluate_stage<ConcreteAlgebra>(ralg, reduced, leaf_value);
    } catch (const EvalError&) {
      continue;  // these reduced values leave the domain: no counterexample to lift
    }
    auto lifted = [&](const std::string& name, DClass cls) {
      const int t = leaf_owner(name);
      if (t < 0) return Rational(0);  // a part absent from the stage
      const size_t underscore = name.find('_');
      const std::vector<int64_t> q =
          unflatten(full.tensors[t].shape, std::stoll(name.substr(underscore + 1)));
      std::vector<int64_t> r(q.size());
      bool exact = true;
      for (size_t d = 0; d < q.size(); ++d) {
        const std::optional<int64_t> k = kept(positions_of(reduced, t, d), q[d]);
        exact = exact && k.has_value();
        r[d] = k ? *k : at_or_before(positions_of(reduced, t, d), q[d]);
      }
      if (!exact && cls == DClass::Real) return Rational(0);
      return leaf_value(name.substr(0, 1) + std::to_string(t) + "_" +
                            std::to_string(flat_index(reduced.tensors[t].shape, r)),
                        cls);
    };
    ConcreteAlgebra falg(fns);
    StageValues<ConcreteAlgebra> fvalues;
    try {
      fvalues = evaluate_stage<ConcreteAlgebra>(falg, full, lifted);
    } catch (const EvalError& e) {
      ADD_FAILURE() << full.title << ": the zero lift leaves the domain: " << e.what();
      continue;
    }
    ++counts.accepted;
    for (size_t t = 0; t < full.tensors.size(); ++t) {
      if (!fvalues[t] || !rvalues[t]) continue;
      const Tensor<Rational>& f = *fvalues[t];
      const Tensor<Rational>& r = *rvalues[t];
      for (int64_t i = 0; i < f.size(); ++i) {
        const std::vector<int64_t> q = unflatten(f.shape, i);
        std::vector<int64_t> ri(q.size());
        bool exact = true, zero = false;
        for (size_t d = 0; d < q.size(); ++d) {
          const std::optional<int64_t> k = kept(positions_of(reduced, t, d), q[d]);
          exact = exact && k.has_value();
          if (k) ri[d] = *k;
          if (!k && padding.zero[t][d]) zero = true;
        }
        if (exact) {
          EXPECT_EQ(f.data[i], r.at(ri)) << full.title << ": " << full.tensors[t].name << " at "
                                         << ::testing::PrintToString(q);
        } else if (zero) {
          EXPECT_EQ(f.data[i], Rational(0))
              << full.title << ": " << full.tensors[t].name << " off its kept positions";
        }
      }
    }
  }
  return counts;
}

TEST(ZeroPadding, TheFullStageHoldsTheReducedValuesOnGeneratedStages) {
  Counts total;
  auto add = [&](const nlohmann::json& plan) {
    const Counts c = check_stages(plan);
    total.accepted += c.accepted;
    total.refused += c.refused;
  };
  add(planner::generate_plan("mlp", testing::mlp_config(2, 2, 2, 1, 2, "adam")));
  planner::PlanConfig sp = testing::transformer_config(1, 1, 2, 1, 1);
  sp.sp = true;
  add(planner::generate_plan("llama3-tiny", sp));
  planner::PlanConfig clip = testing::transformer_config(2, 2, 2, 1, 1);
  clip.clip = true;
  add(planner::generate_plan("llama3-tiny", clip));
  planner::PlanConfig zero = testing::transformer_config(2, 2, 1, 1, 1);
  zero.zero = 1;
  add(planner::generate_plan("llama3-tiny", zero));
  planner::PlanConfig moe = testing::transformer_config(2, 2, 1, 1, 1);
  moe.ep = 2;
  add(planner::generate_plan("moe-tiny", moe));
  // Both answers occur: the check is not vacuous either way.
  EXPECT_GT(total.accepted, 20);
  EXPECT_GT(total.refused, 20);
}

constexpr int64_t kRows = 4096, kCols = 2048;  // 8,388,608 elements: too many to replay

// The sum of squares of x; the parallel side splits x in two halves and
// adds the halves' sums of squares, or (the bug) takes the first only: a
// gradient norm over the local shard.
json sum_of_squares(bool both_halves) {
  auto rc = json::array({kRows, kCols});
  auto half = json::array({kRows / 2, kCols});
  json lt = {{"x", tensor(rc)}, {"sq", tensor(rc)}, {"y", tensor(json::array())}};
  json lops = {op("sq", "square", {"x"}, {"sq"}), op("y", "sum", {"sq"}, {"y"})};
  json pt = {{"p.a", ptensor(half)},           {"p.b", ptensor(half)},
             {"p.qa", ptensor(half)},          {"p.qb", ptensor(half)},
             {"p.sa", ptensor(json::array())}, {"p.sb", ptensor(json::array())},
             {"p.y", scalar_claim("y")}};
  json pops = {
      op("p.a", "split", {"p.x"}, {"p.a", "p.b"}, {{"dim", 0}, {"sizes", {kRows / 2, kRows / 2}}}),
      op("p.qa", "square", {"p.a"}, {"p.qa"}), op("p.qb", "square", {"p.b"}, {"p.qb"}),
      op("p.sa", "sum", {"p.qa"}, {"p.sa"}), op("p.sb", "sum", {"p.qb"}, {"p.sb"})};
  if (both_halves)
    pops.push_back(op("p.y", "add", {"p.sa", "p.sb"}, {"p.y"}));
  else
    pops.push_back(op("p.y", "scale", {"p.sa"}, {"p.y"}, {{"factor", 1}}));
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

// A scalar of 8 million squares cannot be narrowed (its one element needs
// them all), so before, the refutation had no witness and was unknown.
TEST(ZeroPadding, AGlobalSumOfSquaresTooLargeToReplayHasAFullSizeWitness) {
  Report bug = verify_json(sum_of_squares(false), "padded-bug");
  ASSERT_EQ(bug.verdict, Verdict::NotEquivalent) << explain(bug);
  EXPECT_NE(explain(bug).find("lifted to full size with zeros"), std::string::npos) << explain(bug);
  Report good = verify_json(sum_of_squares(true), "padded-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
}

// The trap: the sum of exp(x - neg(neg(x))) over 8 million elements is the
// count times exp(0), which the parallel side writes as such (correct).
// Pieces of 2 and 3 count fewer (section 7's blind spot), so the stage is
// refuted at reduced size only. exp(0) is no zero: the zero lift would add
// 8 million copies of it, and the rule must refuse rather than confirm the
// reduced difference.
TEST(ZeroPadding, ASumOfValuesNotZeroOffTheKeptElementsIsNoWitness) {
  auto rc = json::array({kRows, kCols});
  json lt = {{"x", tensor(rc)}, {"n", tensor(rc)}, {"nn", tensor(rc)},
             {"d", tensor(rc)}, {"e", tensor(rc)}, {"y", tensor(json::array())}};
  json lops = {op("n", "neg", {"x"}, {"n"}), op("nn", "neg", {"n"}, {"nn"}),
               op("d", "sub", {"x", "nn"}, {"d"}), op("e", "exp", {"d"}, {"e"}),
               op("y", "sum", {"e"}, {"y"})};
  json pt = {
      {"p.z", ptensor(json::array())}, {"p.k", ptensor(json::array())}, {"p.y", scalar_claim("y")}};
  json pops = {constant("p.z", 0, json::array()), op("p.k", "exp", {"p.z"}, {"p.k"}),
               op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", kRows * kCols}})};
  Report r = verify_json(one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"}),
                         "padded-trap");
  EXPECT_NE(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(r.verdict, Verdict::Equivalent) << explain(r);
  EXPECT_NE(explain(r).find("zero-padded lift does not keep"), std::string::npos) << explain(r);
}

}  // namespace
}  // namespace shardproof
