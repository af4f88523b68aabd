// Claim inference (engine/infer/): the modular algebra's field and order,
// the claims proposed for a data-parallel step that claims nothing between
// its inputs and its updated weights, and the rule that a proposal which a
// finding involves is withdrawn and never reported.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/core/tensor.h"
#include "engine/format/plan_parser.h"
#include "engine/infer/claim_inference.h"
#include "engine/infer/hinted_verify.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using M = ModularAlgebra;

Rational q(long n, long d = 1) {
  Rational r(n, d);
  r.canonicalize();
  return r;
}

TEST(ModularAlgebra, FieldArithmeticAndReconstruction) {
  M alg;
  EXPECT_EQ(alg.mul(M::of(q(1, 3)), M::of(q(3))), M::of(q(1)));
  EXPECT_EQ(alg.add(M::of(q(-7, 2)), M::of(q(7, 2))), 0u);
  EXPECT_THROW(alg.div(M::of(q(1)), 0), EvalError);
  for (auto [n, d] :
       {std::pair<long, long>{-7, 3}, {1, 2}, {8, 1}, {0, 1}, {-1, 1}, {123456, 789}}) {
    int64_t num = 0, den = 0;
    ASSERT_TRUE(M::small_rational(M::of(q(n, d)), num, den)) << n << "/" << d;
    EXPECT_EQ(num, q(n, d).get_num().get_si());
    EXPECT_EQ(den, q(n, d).get_den().get_si());
  }
  // A random residue is no small rational.
  int64_t num = 0, den = 0;
  EXPECT_FALSE(M::small_rational(987654321987654321ULL, num, den));
}

TEST(ModularAlgebra, OrderAgreesWithTheRationalsOnSmallValues) {
  M alg;
  const std::vector<Rational> values = {q(-5), q(-1, 2), q(0), q(1, 3), q(1, 2), q(2), q(7, 3)};
  for (const Rational& a : values)
    for (const Rational& b : values) {
      EXPECT_EQ(alg.lt(M::of(a), M::of(b)), a < b ? 1u : 0u);
      EXPECT_EQ(alg.maximum(M::of(a), M::of(b)), M::of(a < b ? b : a));
    }
  // A large residue sits outside the small values, on its sign's side, and
  // the order stays total: max of maxes is the max.
  const uint64_t big = 987654321987654321ULL, small = M::of(q(5));  // big: no small rational
  EXPECT_EQ(alg.maximum(big, small), big);
  EXPECT_EQ(alg.maximum(alg.neg(big), small), small);
  EXPECT_EQ(alg.cast(M::of(q(-7, 2)), DClass::Real, DClass::Int), M::of(q(-4)));
}

TEST(ModularAlgebra, FunctionsAreFixedAndDependOnNameAndArguments) {
  M alg(7), other(8);
  EXPECT_EQ(alg.call("exp", {1, 2}), alg.call("exp", {1, 2}));
  EXPECT_NE(alg.call("exp", {1, 2}), alg.call("exp", {2, 1}));
  EXPECT_NE(alg.call("exp", {1}), alg.call("log", {1}));
  EXPECT_NE(alg.call("exp", {1}), other.call("exp", {1}));
}

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// One SGD step of y = tanh(x @ w) under an MSE loss on one device and over
// dp ranks (rank r holds rows 4r..4r+3; `rows`, `in` and `out` give other
// sizes: rows a rank, x's columns, w's columns), where the parallel graph claims
// only its inputs and its updated weights: every stage between is the whole
// step, unless claims are inferred. `averaged` false: the DDP average is
// missing (a bug).
json ddp_plan(int dp, bool averaged = true, int local = 4, int in = 4, int out = 3) {
  const int rows = local * dp;
  json lt = {{"x", tensor({rows, in})},   {"w", tensor({in, out})},    {"t", tensor({rows, out})},
             {"z", tensor({rows, out})},  {"h", tensor({rows, out})},  {"d", tensor({rows, out})},
             {"dh", tensor({rows, out})}, {"g", tensor({rows, out})},  {"dz", tensor({rows, out})},
             {"dw", tensor({in, out})},   {"w_new", tensor({in, out})}};
  auto step = [](const std::string& p, const std::string& mse) {
    return json::array(
        {{{"op", "matmul"}, {"in", {p + "x", p + "w"}}, {"out", {p + "z"}}},
         {{"op", "tanh"}, {"in", {p + "z"}}, {"out", {p + "h"}}},
         {{"op", "sub"}, {"in", {p + "h", p + "t"}}, {"out", {p + "d"}}},
         {{"op", "scale"}, {"in", {p + "d"}}, {"out", {p + "dh"}}, {"attrs", {{"factor", mse}}}},
         {{"op", "map"}, {"in", {p + "z"}}, {"out", {p + "g"}}, {"attrs", {{"fn", "tanh_grad"}}}},
         {{"op", "mul"}, {"in", {p + "dh", p + "g"}}, {"out", {p + "dz"}}},
         {{"op", "matmul"},
          {"in", {p + "x", p + "dz"}},
          {"out", {p + "dw"}},
          {"attrs", {{"transpose_a", true}}}}});
  };
  json lops = step("", "2/" + std::to_string(rows * out));
  lops.push_back(
      {{"op", "sgd"}, {"in", {"w", "dw"}}, {"out", {"w_new"}}, {"attrs", {{"lr", "1/10"}}}});
  json logical = {
      {"tensors", lt}, {"inputs", {"x", "w", "t"}}, {"ops", lops}, {"outputs", {"w_new"}}};

  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array(), reduce_in = json::array(), reduce_out = json::array(),
       group = json::array();
  for (int r = 0; r < dp; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int lo = local * r, hi = lo + local;
    tensors[p + "x"] = tensor({local, in}, r, {{"tensor", "x"}, {"slice", {{lo, hi}, {0, in}}}});
    tensors[p + "t"] = tensor({local, out}, r, {{"tensor", "t"}, {"slice", {{lo, hi}, {0, out}}}});
    tensors[p + "w"] = tensor({in, out}, r, {{"tensor", "w"}});
    for (const char* name : {"x", "t", "w"}) inputs.push_back(p + name);
    for (const char* t : {"z", "h", "d", "dh", "g", "dz"}) tensors[p + t] = tensor({local, out}, r);
    for (const char* t : {"dw", "dw_sum", "dw_avg"}) tensors[p + t] = tensor({in, out}, r);
    tensors[p + "w_new"] = tensor({in, out}, r, {{"tensor", "w_new"}});
    outputs.push_back(p + "w_new");
    for (json op : step(p, "2/" + std::to_string(local * out))) ops.push_back(op);
    reduce_in.push_back(p + "dw");
    reduce_out.push_back(p + "dw_sum");
    group.push_back(r);
    ops.push_back({{"op", "scale"},
                   {"in", {p + "dw_sum"}},
                   {"out", {p + "dw_avg"}},
                   {"attrs", {{"factor", "1/" + std::to_string(averaged ? dp : 1)}}}});
    ops.push_back({{"op", "sgd"},
                   {"in", {p + "w", p + "dw_avg"}},
                   {"out", {p + "w_new"}},
                   {"attrs", {{"lr", "1/10"}}}});
  }
  ops.push_back({{"op", "all_reduce"}, {"in", reduce_in}, {"out", reduce_out}, {"group", group}});
  json parallel = {
      {"world", dp}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "ddp"},
          {"logical", logical},
          {"parallel", parallel}};
}

Plan parse(const json& doc, const std::string& stem) {
  return testing::parse_doc(doc, stem);
}

VerifyOptions with_inference(ClaimInference mode) {
  return testing::inference_options(mode);
}

// "r0.dh" -> "2 x dh[0:4, 0:3]"
std::map<std::string, std::string> described(const Plan& plan,
                                             const std::vector<infer::InferredClaim>& claims) {
  std::map<std::string, std::string> out;
  for (const infer::InferredClaim& c : claims) {
    std::string text;
    if (c.of.scaled()) text = rational_to_string(c.of.scale()) + " x ";
    text += c.of.tensor + "[";
    for (size_t d = 0; d < c.of.slice.size(); ++d)
      text += (d ? ", " : "") + std::to_string(c.of.slice[d].first) + ":" +
              std::to_string(c.of.slice[d].second);
    out[plan.parallel.tensors[static_cast<size_t>(c.parallel)].name] = text + "]";
  }
  return out;
}

TEST(ClaimInference, ProposesSlicesAndDataParallelScales) {
  const Plan plan = parse(ddp_plan(2), "infer-ddp");
  const infer::InferenceResult result = infer::infer_claims(plan);
  EXPECT_EQ(result.skipped, "");
  const std::map<std::string, std::string> got = described(plan, result.claims);
  // Each rank's forward rows, its backward rows at dp x (its loss is a mean
  // over its own rows), the all-reduced gradient at dp x, the average.
  const std::map<std::string, std::string> want = {
      {"r0.z", "z[0:4, 0:3]"},           {"r1.z", "z[4:8, 0:3]"},
      {"r0.h", "h[0:4, 0:3]"},           {"r1.h", "h[4:8, 0:3]"},
      {"r0.d", "d[0:4, 0:3]"},           {"r1.d", "d[4:8, 0:3]"},
      {"r0.g", "g[0:4, 0:3]"},           {"r1.g", "g[4:8, 0:3]"},
      {"r0.dh", "2 x dh[0:4, 0:3]"},     {"r1.dh", "2 x dh[4:8, 0:3]"},
      {"r0.dz", "2 x dz[0:4, 0:3]"},     {"r1.dz", "2 x dz[4:8, 0:3]"},
      {"r0.dw_sum", "2 x dw[0:4, 0:3]"}, {"r1.dw_sum", "2 x dw[0:4, 0:3]"},
      {"r0.dw_avg", "dw[0:4, 0:3]"},     {"r1.dw_avg", "dw[0:4, 0:3]"}};
  EXPECT_EQ(got, want);  // r*.dw, a partial sum over the rank's rows, is no slice
}

// y = x * cast(b) on two ranks, each holding 16 of the 32 positions. The
// ranks' masks hold only 0 and 1: a block of them equals many blocks of the
// logical mask by coincidence (at 4 data-parallel tokens a rank, the GPT
// block's masks did, and their failed proposals withdrew real claims with
// them). Tensors of small rationals are never proposed.
TEST(ClaimInference, MasksAreNotProposed) {
  json logical = {{"tensors",
                   {{"b", {{"shape", {32}}, {"dtype", "bool"}}},
                    {"x", tensor({32})},
                    {"m", tensor({32})},
                    {"y", tensor({32})}}},
                  {"inputs", {"b", "x"}},
                  {"ops",
                   {{{"op", "cast"}, {"in", {"b"}}, {"out", {"m"}}, {"attrs", {{"dtype", "f32"}}}},
                    {{"op", "mul"}, {"in", {"x", "m"}}, {"out", {"y"}}}}},
                  {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const json slice = {{16 * r, 16 * r + 16}};
    tensors[p + "b"] = {{"shape", {16}},
                        {"dtype", "bool"},
                        {"rank", r},
                        {"of", {{"tensor", "b"}, {"slice", slice}}}};
    tensors[p + "x"] = tensor({16}, r, {{"tensor", "x"}, {"slice", slice}});
    tensors[p + "m"] = tensor({16}, r);
    tensors[p + "y"] = tensor({16}, r, {{"tensor", "y"}, {"slice", slice}});
    inputs.push_back(p + "b");
    inputs.push_back(p + "x");
    outputs.push_back(p + "y");
    ops.push_back(
        {{"op", "cast"}, {"in", {p + "b"}}, {"out", {p + "m"}}, {"attrs", {{"dtype", "f32"}}}});
    ops.push_back({{"op", "mul"}, {"in", {p + "x", p + "m"}}, {"out", {p + "y"}}});
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  const Plan plan = parse({{"format", "shardproof-plan/1"},
                           {"name", "masks"},
                           {"logical", logical},
                           {"parallel", parallel}},
                          "infer-masks");
  const infer::InferenceResult result = infer::infer_claims(plan);
  EXPECT_EQ(result.skipped, "");
  EXPECT_EQ(described(plan, result.claims), (std::map<std::string, std::string>{}));
}

TEST(ClaimInference, ProvesTheStepThroughInferredClaims) {
  const Plan plan = parse(ddp_plan(2), "infer-ddp-verify");
  const Report off = verify_plan(plan, with_inference(ClaimInference::Off));
  const Report on = verify_plan(plan, with_inference(ClaimInference::On));
  EXPECT_EQ(on.verdict, Verdict::Equivalent) << testing::explain(on);
  EXPECT_EQ(on.stats.inferred_claims, 16);
  EXPECT_EQ(on.stats.inferred_kept, 16) << testing::explain(on);
  EXPECT_GT(on.stats.stages, off.stats.stages);  // cut at the proven proposals
  // Stages of an earlier round are counted as they were decided, not cached.
  EXPECT_EQ(decided_total(on.stats), on.stats.unique_stages) << report_headline(on);
  EXPECT_EQ(on.stats.cached, 0) << report_headline(on);
  EXPECT_NE(off.verdict, Verdict::NotEquivalent) << testing::explain(off);
}

TEST(ClaimInference, AutoInfersOnlyForCapturedPrograms) {
  json doc = ddp_plan(2);
  const Report plain = verify_plan(parse(doc, "infer-auto"), with_inference(ClaimInference::Auto));
  EXPECT_EQ(plain.stats.inferred_claims, 0);
  doc["parallel"]["ops"][0]["src"] = {{"file", "train.py"}, {"line", 3}};
  const Report captured =
      verify_plan(parse(doc, "infer-auto-src"), with_inference(ClaimInference::Auto));
  EXPECT_GT(captured.stats.inferred_claims, 0);
  EXPECT_EQ(captured.verdict, Verdict::Equivalent) << testing::explain(captured);
}

TEST(ClaimInference, AMissingAverageIsFoundAtTheUpdateWithInference) {
  const Plan plan = parse(ddp_plan(2, /*averaged=*/false), "infer-ddp-bug");
  const Report r = verify_plan(plan, with_inference(ClaimInference::On));
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  // The proposals on the average (2 x dw, not dw) were never made, so the
  // finding is the plan's own claim.
  EXPECT_EQ(r.findings.at(0).tensor, "w_new") << testing::explain(r);
}

// The same step at sizes too large to evaluate whole (8192 x 1024 rows of
// activations, 6.8e7 elements): each stage of the plan as written is
// evaluated at reduced size instead, and what it proposes is the same claim
// at full size. The step is proven through them, and the bug still found.
TEST(ClaimInference, AStepTooLargeToEvaluateWholeIsProvedThroughReducedStages) {
  const Plan large = parse(ddp_plan(2, true, 4096, 1024, 1024), "infer-ddp-large");
  const infer::InferenceResult reduced = infer::infer_claims(large);
  EXPECT_EQ(reduced.skipped, "");
  // What ProposesSlicesAndDataParallelScales finds on the small plan.
  std::map<std::string, std::string> want;
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const std::string rows =
        "[" + std::to_string(4096 * r) + ":" + std::to_string(4096 * r + 4096) + ", 0:1024]";
    for (const char* t : {"z", "h", "d", "g"}) want[p + t] = t + rows;
    for (const char* t : {"dh", "dz"}) want[p + t] = std::string("2 x ") + t + rows;
    want[p + "dw_sum"] = "2 x dw[0:1024, 0:1024]";
    want[p + "dw_avg"] = "dw[0:1024, 0:1024]";
  }
  EXPECT_EQ(described(large, reduced.claims), want);

  const Report ok = verify_plan(large, with_inference(ClaimInference::On));
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
  EXPECT_EQ(ok.stats.inferred_kept, ok.stats.inferred_claims);
  const Report bug = verify_plan(parse(ddp_plan(2, false, 4096, 1024, 1024), "infer-ddp-large-bug"),
                                 with_inference(ClaimInference::On));
  ASSERT_EQ(bug.verdict, Verdict::NotEquivalent) << testing::explain(bug);
  EXPECT_EQ(bug.findings.at(0).tensor, "w_new") << testing::explain(bug);
}

// A proposal that is false (r0.d claims h's rows) is withdrawn with its
// family (every proposal on h) and never reported; the rest still cut.
TEST(ClaimInference, AFalseProposalIsWithdrawnNotReported) {
  const Plan plan = parse(ddp_plan(2), "infer-false");
  std::vector<infer::InferredClaim> proposals = infer::infer_claims(plan).claims;
  const size_t before = proposals.size();
  for (infer::InferredClaim& c : proposals)
    if (plan.parallel.tensors[static_cast<size_t>(c.parallel)].name == "r0.d") {
      c.of.tensor = "h";
      c.of.logical = plan.logical.find("h");
    }
  const Report r =
      infer::verify_with_proposals(plan, with_inference(ClaimInference::On), proposals, nullptr);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.stats.inferred_claims, static_cast<int64_t>(before));
  // Withdrawn: the h family (r0.h, r1.h and the false r0.d), and the dh
  // family, whose stage on rank 0 read the false claim and failed with it.
  // The d family keeps r1.d; z, g, dz, dw_sum, dw_avg stay.
  EXPECT_EQ(r.stats.inferred_kept, static_cast<int64_t>(before) - 5) << testing::explain(r);
  // Two rounds (the second after the withdrawal): still one count per stage.
  EXPECT_EQ(decided_total(r.stats), r.stats.unique_stages) << report_headline(r);
  EXPECT_EQ(r.stats.cached, 0) << report_headline(r);

  // On a buggy plan a false proposal changes nothing either: the finding is
  // the plan's own.
  const Plan buggy = parse(ddp_plan(2, false), "infer-false-bug");
  std::vector<infer::InferredClaim> wrong = infer::infer_claims(buggy).claims;
  for (infer::InferredClaim& c : wrong) c.of.scale_num *= 3;  // all false
  const Report b =
      infer::verify_with_proposals(buggy, with_inference(ClaimInference::On), wrong, nullptr);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  for (const Finding& f : b.findings) EXPECT_EQ(f.tensor, "w_new") << testing::explain(b);
  EXPECT_EQ(b.stats.inferred_kept, 0);
}

// A recomputation: the backward pass computes tanh(x) again (as layer norm's
// and attention's decompositions recompute x - mean and the scores), in both
// graphs. The twins hold equal values, so values cannot choose between them;
// the cut can: each rank's twin claims the logical twin its consumer's
// logical op reads, so every stage's logical cone is its own op.
json recompute_plan() {
  json lt = {{"x", tensor({8, 3})}, {"y", tensor({8, 3})},  {"c", tensor({8, 3})},
             {"s", tensor({8, 3})}, {"c2", tensor({8, 3})}, {"g", tensor({8, 3})},
             {"o", tensor({8, 3})}};
  auto ops = [](const std::string& p) {
    return json::array({{{"op", "tanh"}, {"in", {p + "x"}}, {"out", {p + "c"}}},
                        {{"op", "mul"}, {"in", {p + "c", p + "c"}}, {"out", {p + "s"}}},
                        {{"op", "tanh"}, {"in", {p + "x"}}, {"out", {p + "c2"}}},
                        {{"op", "mul"}, {"in", {p + "c2", p + "y"}}, {"out", {p + "g"}}},
                        {{"op", "add"}, {"in", {p + "s", p + "g"}}, {"out", {p + "o"}}}});
  };
  json logical = {{"tensors", lt}, {"inputs", {"x", "y"}}, {"ops", ops("")}, {"outputs", {"o"}}};
  json tensors = json::object(), pops = json::array(), inputs = json::array(),
       outputs = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const json rows = {{4 * r, 4 * r + 4}, {0, 3}};
    for (const char* in : {"x", "y", "o"}) {
      tensors[p + in] = tensor({4, 3}, r, {{"tensor", in}, {"slice", rows}});
      if (std::string(in) != "o") inputs.push_back(p + in);
    }
    for (const char* t : {"c", "s", "c2", "g"}) tensors[p + t] = tensor({4, 3}, r);
    outputs.push_back(p + "o");
    for (json op : ops(p)) pops.push_back(op);
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", pops}, {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "recompute"},
          {"logical", logical},
          {"parallel", parallel}};
}

TEST(ClaimInference, ARecomputedTwinClaimsTheTwinItsConsumersRead) {
  const Plan plan = parse(recompute_plan(), "infer-recompute");
  const std::map<std::string, std::string> got = described(plan, infer::infer_claims(plan).claims);
  const std::map<std::string, std::string> want = {
      {"r0.c", "c[0:4, 0:3]"}, {"r1.c", "c[4:8, 0:3]"},   {"r0.s", "s[0:4, 0:3]"},
      {"r1.s", "s[4:8, 0:3]"}, {"r0.c2", "c2[0:4, 0:3]"}, {"r1.c2", "c2[4:8, 0:3]"},
      {"r0.g", "g[0:4, 0:3]"}, {"r1.g", "g[4:8, 0:3]"}};
  EXPECT_EQ(got, want);
  // Every stage holds one logical op: no cone runs back through a twin.
  const std::vector<Stage> stages =
      build_stages(infer::with_claims(plan, infer::infer_claims(plan).claims));
  for (const Stage& s : stages) {
    int logical_ops = 0;
    for (const StageOp& op : s.ops) logical_ops += op.parallel ? 0 : 1;
    EXPECT_LE(logical_ops, 1) << s.title;
  }
  const Report r = verify_plan(plan, with_inference(ClaimInference::On));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.stats.inferred_kept, 8) << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
