// Claim inference on a global-norm gradient clip (the pattern of
// tests/programs/tied_vocab_parallel with tied-counted-twice): the clipping
// coefficient min(1 / norm, 1) is one comparison of a random value, and a
// tied weight's gradient is squared twice, in both graphs.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/infer/claim_inference.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using M = ModularAlgebra;

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// g (8 x 3) clipped by a norm: out = g * min(1 / n, 1), n the sum of the
// squares of e = g @ w (another gradient), taken `squares` times and added
// (a tied weight listed once per module). Two ranks hold all of g and w;
// each averages g first (u = (2 g) / 2, unclaimed), as finalize_grads does
// before clipping.
json clip_plan(int squares) {
  json lt = {{"g", tensor({8, 3})},          {"w", tensor({3, 3})},
             {"e", tensor({8, 3})},          {"r", tensor(json::array())},
             {"one", tensor(json::array())}, {"c", tensor(json::array())},
             {"out", tensor({8, 3})}};
  auto clip = [squares](const std::string& p, const std::string& g, json& tensors, int rank) {
    json ops = json::array();
    ops.push_back({{"op", "matmul"}, {"in", {g, p + "w"}}, {"out", {p + "e"}}});
    std::string total;
    for (int k = 0; k < squares; ++k) {
      const std::string sq = p + "sq" + std::to_string(k), s = p + "s" + std::to_string(k);
      tensors[sq] = tensor({8, 3}, rank);
      tensors[s] = tensor(json::array(), rank);
      ops.push_back({{"op", "mul"}, {"in", {p + "e", p + "e"}}, {"out", {sq}}});
      ops.push_back({{"op", "sum"}, {"in", {sq}}, {"out", {s}}, {"attrs", {{"dims", {0, 1}}}}});
      if (total.empty()) {
        total = s;
        continue;
      }
      const std::string next = p + "t" + std::to_string(k);
      tensors[next] = tensor(json::array(), rank);
      ops.push_back({{"op", "add"}, {"in", {total, s}}, {"out", {next}}});
      total = next;
    }
    ops.push_back({{"op", "reciprocal"}, {"in", {total}}, {"out", {p + "r"}}});
    ops.push_back({{"op", "const"},
                   {"in", json::array()},
                   {"out", {p + "one"}},
                   {"attrs", {{"value", 1}, {"shape", json::array()}, {"dtype", "f32"}}}});
    ops.push_back({{"op", "minimum"}, {"in", {p + "r", p + "one"}}, {"out", {p + "c"}}});
    ops.push_back({{"op", "mul"}, {"in", {g, p + "c"}}, {"out", {p + "out"}}});
    return ops;
  };
  json lops = clip("", "g", lt, -1);
  json logical = {{"tensors", lt}, {"inputs", {"g", "w"}}, {"ops", lops}, {"outputs", {"out"}}};

  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "g"] = tensor({8, 3}, r, {{"tensor", "g"}});
    tensors[p + "w"] = tensor({3, 3}, r, {{"tensor", "w"}});
    for (const char* t : {"g2", "u", "e"}) tensors[p + t] = tensor({8, 3}, r);
    for (const char* t : {"r", "one", "c"}) tensors[p + t] = tensor(json::array(), r);
    tensors[p + "out"] = tensor({8, 3}, r, {{"tensor", "out"}});
    inputs.push_back(p + "g");
    inputs.push_back(p + "w");
    outputs.push_back(p + "out");
    ops.push_back(
        {{"op", "scale"}, {"in", {p + "g"}}, {"out", {p + "g2"}}, {"attrs", {{"factor", 2}}}});
    ops.push_back(
        {{"op", "scale"}, {"in", {p + "g2"}}, {"out", {p + "u"}}, {"attrs", {{"factor", "1/2"}}}});
    for (json op : clip(p, p + "u", tensors, r)) ops.push_back(op);
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "clip"},
          {"logical", logical},
          {"parallel", parallel}};
}

// parallel tensor name -> logical tensor its inferred claim names
std::map<std::string, std::string> named(const Plan& plan,
                                         const std::vector<infer::InferredClaim>& claims) {
  std::map<std::string, std::string> out;
  for (const infer::InferredClaim& c : claims)
    out[plan.parallel.tensors[static_cast<size_t>(c.parallel)].name] = c.of.tensor;
  return out;
}

TEST(ModularAlgebra, TheMirroredOrderFlipsOnlyWhatSitsOutsideTheSmallRationals) {
  const M alg(0), mirrored(0, /*mirrored=*/true);
  const uint64_t big = 987654321987654321ULL, one = M::of(Rational(1));
  const uint64_t half = M::of(Rational(1, 2));
  EXPECT_EQ(alg.minimum(big, one), one);  // big sits above the small rationals
  EXPECT_EQ(mirrored.minimum(big, one), big);
  EXPECT_EQ(alg.maximum(big, alg.neg(big)), big);
  EXPECT_EQ(mirrored.maximum(big, alg.neg(big)), alg.neg(big));
  EXPECT_EQ(mirrored.minimum(half, one), half);  // small rationals keep their order
  EXPECT_EQ(mirrored.lt(half, one), 1u);
}

// Under one of the two orders of a random norm the coefficient is 1 and
// out = g: the doubled gradient g2 = 2 g matched 2 x out, the chooser took
// that claim (its cone is not empty) over 2 x g (what g2's input claims,
// rescaled), and the false claim's stage held the whole norm. About half
// the seeds did; none may.
TEST(ClaimInference, ASaturatedClippingCoefficientProposesNothing) {
  const Plan plan = testing::parse_doc(clip_plan(1), "infer-clip");
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    infer::InferenceLimits limits;
    limits.seed = seed;
    const std::map<std::string, std::string> got =
        named(plan, infer::infer_claims(plan, limits).claims);
    for (const std::string r : {"r0.", "r1."})
      for (const char* t : {"g2", "u"}) {
        ASSERT_TRUE(got.count(r + t)) << "seed " << seed;
        EXPECT_EQ(got.at(r + t), "g") << r + t << ", seed " << seed;
      }
  }
}

// The squares of a tied gradient, twins in both graphs: each rank's two
// squares name the two logical twins (which one names which does not
// matter: they are equal), so the stage of out stops at both. Both claimed
// as one twin, the other was left uncut and out's logical cone ran back
// through it to e's matmul (in the tied program, through the whole
// backward pass).
TEST(ClaimInference, TwinsComputedTwiceOnARankNameBothLogicalTwins) {
  const Plan plan = testing::parse_doc(clip_plan(2), "infer-clip-twice");
  const std::vector<infer::InferredClaim> claims = infer::infer_claims(plan).claims;
  const std::map<std::string, std::string> got = named(plan, claims);
  for (const std::string r : {"r0.", "r1."}) {
    ASSERT_TRUE(got.count(r + "sq0") && got.count(r + "sq1"));
    EXPECT_EQ((std::set<std::string>{got.at(r + "sq0"), got.at(r + "sq1")}),
              (std::set<std::string>{"sq0", "sq1"}));
  }
  for (const Stage& s : build_stages(infer::with_claims(plan, claims)))
    for (const StageOp& op : s.ops)
      EXPECT_TRUE(op.parallel || op.op != "matmul" || s.title == "e[0:8, 0:3]") << s.title;
  const Report r = verify_plan(plan, testing::inference_options(ClaimInference::On));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.stats.inferred_kept, r.stats.inferred_claims) << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
