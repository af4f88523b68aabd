// Cut tensors the logical side does not read (engine/stage/defined_cut.h):
// a parallel input claims a value twin of what the logical cone computes
// (the [4,2] reshape of a [2,2,2] view the logical sum reads). Left free,
// the twin takes arbitrary values on the parallel side alone, a false
// refutation; defined by its producers, the stage proves. The same shapes
// with a wrong collective are still refuted where they are wrong.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// Logically a = tanh(x), b = a viewed [2,2,2], v = b flattened back (a twin
// of a), s = the sum of b over its first dim. Rank r holds rows 2r..2r+1 of
// x; its tanh claims rows of v, and an all-reduce of the ranks' tanh claims
// s. s's logical cone reads b, never v. `reduce`: the all-reduce's.
// `v_extra`: v is instead reshape(b) + this logical input (a value the
// stage of s does not hold).
json twin_plan(const std::string& reduce = "sum", bool v_extra = false) {
  json lt = {{"x", tensor({4, 2})},   {"a", tensor({4, 2})}, {"b", tensor({2, 2, 2})},
             {"v", tensor({4, 2})},   {"s", tensor({2, 2})}, {"vb", tensor({4, 2})},
             {"zero", tensor({4, 2})}};
  json lops = {
      {{"op", "tanh"}, {"in", {"x"}}, {"out", {"a"}}},
      {{"op", "reshape"}, {"in", {"a"}}, {"out", {"b"}}, {"attrs", {{"shape", {2, 2, 2}}}}},
      {{"op", "sum"}, {"in", {"b"}}, {"out", {"s"}}, {"attrs", {{"dims", {0}}}}}};
  json inputs = {"x"};
  if (v_extra) {
    lops.push_back(
        {{"op", "reshape"}, {"in", {"b"}}, {"out", {"vb"}}, {"attrs", {{"shape", {4, 2}}}}});
    lops.push_back({{"op", "add"}, {"in", {"vb", "zero"}}, {"out", {"v"}}});
    inputs.push_back("zero");
  } else {
    lt.erase("vb");
    lt.erase("zero");
    lops.push_back(
        {{"op", "reshape"}, {"in", {"b"}}, {"out", {"v"}}, {"attrs", {{"shape", {4, 2}}}}});
  }
  json logical = {{"tensors", lt}, {"inputs", inputs}, {"ops", lops}, {"outputs", {"s", "v"}}};

  json tensors = json::object(), ops = json::array(), pin = json::array(), pout = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const json rows = {{2 * r, 2 * r + 2}, {0, 2}};
    tensors[p + "x"] = tensor({2, 2}, r, {{"tensor", "x"}, {"slice", rows}});
    tensors[p + "a"] = tensor({2, 2}, r, {{"tensor", "v"}, {"slice", rows}});
    tensors[p + "s"] = tensor({2, 2}, r, {{"tensor", "s"}});
    pin.push_back(p + "x");
    pout.push_back(p + "a");
    pout.push_back(p + "s");
    ops.push_back({{"op", "tanh"}, {"in", {p + "x"}}, {"out", {p + "a"}}});
  }
  if (v_extra)
    for (int r = 0; r < 2; ++r) {
      const std::string p = "r" + std::to_string(r) + ".";
      tensors[p + "zero"] =
          tensor({2, 2}, r, {{"tensor", "zero"}, {"slice", {{2 * r, 2 * r + 2}, {0, 2}}}});
      pin.push_back(p + "zero");
    }
  ops.push_back({{"op", "all_reduce"},
                 {"in", {"r0.a", "r1.a"}},
                 {"out", {"r0.s", "r1.s"}},
                 {"group", {0, 1}},
                 {"attrs", {{"reduce", reduce}}}});
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", pin}, {"ops", ops}, {"outputs", pout}};
  return {{"format", "shardproof-plan/1"},
          {"name", "unread twin"},
          {"logical", logical},
          {"parallel", parallel}};
}

// Logically n = neg(x), a = maximum(x, n) (abs, as the torch front end
// lowers it), m = max(a), y = m * n. Each of two replicated ranks computes
// n (claimed as n) and a second neg of x, claimed as x scaled by -1 (the
// twin claim inference proposes), and takes its abs from that twin. The
// stage of y reads the cut n beside x: with n free, the logical abs of a
// value no run has differs from the parallel one. `no_twin`: the rank takes
// maximum(x, x) instead, a real bug.
json read_cut_plan(bool no_twin = false) {
  json lt = {{"x", tensor({4})},
             {"n", tensor({4})},
             {"a", tensor({4})},
             {"m", tensor(json::array())},
             {"y", tensor({4})}};
  json lops = {{{"op", "neg"}, {"in", {"x"}}, {"out", {"n"}}},
               {{"op", "maximum"}, {"in", {"x", "n"}}, {"out", {"a"}}},
               {{"op", "max"}, {"in", {"a"}}, {"out", {"m"}}, {"attrs", {{"dims", {0}}}}},
               {{"op", "mul"}, {"in", {"m", "n"}}, {"out", {"y"}}}};
  json logical = {{"tensors", lt}, {"inputs", {"x"}}, {"ops", lops}, {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), pin = json::array(), pout = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "x"] = tensor({4}, r, {{"tensor", "x"}});
    tensors[p + "n"] = tensor({4}, r, {{"tensor", "n"}});
    tensors[p + "t"] = tensor({4}, r, {{"tensor", "x"}, {"scale", -1}});
    tensors[p + "a"] = tensor({4}, r);
    tensors[p + "m"] = tensor(json::array(), r);
    tensors[p + "y"] = tensor({4}, r, {{"tensor", "y"}});
    pin.push_back(p + "x");
    pout.push_back(p + "y");
    ops.push_back({{"op", "neg"}, {"in", {p + "x"}}, {"out", {p + "n"}}});
    ops.push_back({{"op", "neg"}, {"in", {p + "x"}}, {"out", {p + "t"}}});
    ops.push_back(
        {{"op", "maximum"}, {"in", {p + "x", no_twin ? p + "x" : p + "t"}}, {"out", {p + "a"}}});
    ops.push_back(
        {{"op", "max"}, {"in", {p + "a"}}, {"out", {p + "m"}}, {"attrs", {{"dims", {0}}}}});
    ops.push_back({{"op", "mul"}, {"in", {p + "m", p + "n"}}, {"out", {p + "y"}}});
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", pin}, {"ops", ops}, {"outputs", pout}};
  return {{"format", "shardproof-plan/1"},
          {"name", "read cut"},
          {"logical", logical},
          {"parallel", parallel}};
}

Plan parse(const json& doc, const std::string& stem) {
  return testing::parse_doc(doc, stem);
}

VerifyOptions options(ClaimInference mode = ClaimInference::Auto) {
  return testing::inference_options(mode);
}

// The stage unit claiming logical tensor `name`.
const StageUnit& unit_of(const Plan& plan, const std::vector<StageUnit>& units,
                         const std::string& name) {
  for (const StageUnit& u : units)
    if (plan.logical.tensors[static_cast<size_t>(u.logical)].name == name) return u;
  ADD_FAILURE() << "no unit claims " << name;
  return units.front();
}

// Whether the logical cone holds the op that writes `name`.
bool computes(const Plan& plan, const StageUnit& u, const std::string& name) {
  const int producer = plan.logical.producer[static_cast<size_t>(plan.logical.find(name))];
  return std::find(u.logical_cone.begin(), u.logical_cone.end(), producer) != u.logical_cone.end();
}

TEST(UnreadCut, ATwinOnlyTheParallelSideReadsIsDefinedByItsProducers) {
  const Plan plan = parse(twin_plan(), "unread-twin");
  const std::vector<StageUnit> units = cut_units(plan);
  EXPECT_TRUE(computes(plan, unit_of(plan, units, "s"), "v"));
  const Report r = verify_plan(plan, options());
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(UnreadCut, AnAveragedAllReduceIntoTheTwinsSumIsStillFound) {
  const Report r = verify_plan(parse(twin_plan("mean"), "unread-twin-mean"), options());
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_EQ(r.findings.size(), 1u) << testing::explain(r);
  EXPECT_EQ(r.findings[0].tensor, "s") << testing::explain(r);
}

// A twin whose producers read a value the stage does not hold (a logical
// input its cone never reaches) stays free: defining it would add a free
// value the logical side never reads, and prove nothing more.
TEST(UnreadCut, ATwinOfAValueTheStageDoesNotHoldStaysFree) {
  const Plan plan = parse(twin_plan("sum", true), "unread-twin-extra");
  const StageUnit& s = unit_of(plan, cut_units(plan), "s");
  EXPECT_FALSE(computes(plan, s, "v"));
  EXPECT_FALSE(computes(plan, s, "vb"));
}

// A captured step (tests/data/plans/inference/wpe_batch1_harness.py): token
// and position embeddings, a linear head, cross entropy, dp=2 with one batch
// row per rank. On each rank, the sum over the size-1 batch dim of the x
// gradient equals its flattened twin, which inference claims; the logical
// wpe gradient sums the [2,4,2] view instead. Before defined cuts: NOT
// EQUIVALENT at grad:wpe.weight, a false alarm.
json wpe_plan() {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) +
                   "/tests/data/plans/inference/wpe-batch1-dp2.json");
  return json::parse(in);
}

TEST(UnreadCut, TheCapturedOneRowPerRankStepIsEquivalent) {
  const Report r = verify_plan(parse(wpe_plan(), "unread-wpe"), options());
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_GT(r.stats.inferred_claims, 0) << testing::explain(r);
  EXPECT_EQ(r.stats.inferred_kept, r.stats.inferred_claims) << testing::explain(r);
}

// The same step with the wpe gradient's all-reduce averaging (the DDP
// average then taken twice), or left out (each rank steps with its own
// gradient): refuted at the wpe gradient, through the same inferred cut.
TEST(UnreadCut, TheCapturedStepWithAWrongGradientAllReduceIsFound) {
  for (const bool missing : {false, true}) {
    json plan = wpe_plan();
    json kept = json::array();
    for (json& op : plan["parallel"]["ops"]) {
      if (op["op"] != "all_reduce" || op["out"][0] != "r0/all_reduce.1") {
        kept.push_back(op);
      } else if (!missing) {
        op["attrs"]["reduce"] = "mean";
        kept.push_back(op);
      } else {
        for (size_t r = 0; r < op["in"].size(); ++r)
          kept.push_back({{"op", "scale"},
                          {"in", {op["in"][r]}},
                          {"out", {op["out"][r]}},
                          {"attrs", {{"factor", 1}}}});
      }
    }
    plan["parallel"]["ops"] = kept;
    const Report r = verify_plan(parse(plan, "unread-wpe-bug"), options());
    ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << missing << testing::explain(r);
    for (const Finding& f : r.findings)
      EXPECT_EQ(f.tensor, "grad:wpe.weight") << missing << testing::explain(r);
  }
}

}  // namespace
}  // namespace shardproof

namespace shardproof {
namespace {

// A cut tensor the stage reads beside what it is computed from (abs =
// maximum(x, neg x) with neg x cut) is defined too: clip_grad_norm_ with
// norm_type=inf was refuted for values no run has.
TEST(UnreadCut, ACutTheStageReadsBesideItsProducersIsDefined) {
  const Plan plan = parse(read_cut_plan(), "read-cut");
  EXPECT_TRUE(computes(plan, unit_of(plan, cut_units(plan), "y"), "n"));
  const Report r = verify_plan(plan, options(ClaimInference::Off));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(UnreadCut, AnAbsWithoutItsNegationIsStillFound) {
  const Report r = verify_plan(parse(read_cut_plan(true), "read-cut-bug"), options());
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings[0].tensor, "y") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof

namespace shardproof {
namespace {

// Logically m = tanh(x) [2,3], g = transpose(transpose(m)), y = g * g. Each
// of two replicated ranks computes tanh(x) twice, claiming one as m and one
// as g (claim inference names the twin `mm` of a gradient so: Rprop's
// update read `where(c, 0, grad)` claimed as `mm`), and y from both. The
// stage of y reads g and never m; with both free the parallel m * g is not
// the logical g * g for values no run has. g is defined from m through its
// transposes (values moved, each position to one position). `bug`: the rank
// multiplies by x instead.
json transposed_twin_plan(bool bug = false) {
  json lt = {{"x", tensor({2, 3})},
             {"m", tensor({2, 3})},
             {"t", tensor({3, 2})},
             {"g", tensor({2, 3})},
             {"y", tensor({2, 3})}};
  json lops = {{{"op", "tanh"}, {"in", {"x"}}, {"out", {"m"}}},
               {{"op", "transpose"}, {"in", {"m"}}, {"out", {"t"}}, {"attrs", {{"perm", {1, 0}}}}},
               {{"op", "transpose"}, {"in", {"t"}}, {"out", {"g"}}, {"attrs", {{"perm", {1, 0}}}}},
               {{"op", "mul"}, {"in", {"g", "g"}}, {"out", {"y"}}}};
  json logical = {{"tensors", lt}, {"inputs", {"x"}}, {"ops", lops}, {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), pin = json::array(), pout = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "x"] = tensor({2, 3}, r, {{"tensor", "x"}});
    tensors[p + "m"] = tensor({2, 3}, r, {{"tensor", "m"}});
    tensors[p + "g"] = tensor({2, 3}, r, {{"tensor", "g"}});
    tensors[p + "y"] = tensor({2, 3}, r, {{"tensor", "y"}});
    pin.push_back(p + "x");
    pout.push_back(p + "y");
    ops.push_back({{"op", "tanh"}, {"in", {p + "x"}}, {"out", {p + "m"}}});
    ops.push_back({{"op", "tanh"}, {"in", {p + "x"}}, {"out", {p + "g"}}});
    ops.push_back({{"op", "mul"}, {"in", {p + "g", bug ? p + "x" : p + "m"}}, {"out", {p + "y"}}});
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", pin}, {"ops", ops}, {"outputs", pout}};
  return {{"format", "shardproof-plan/1"},
          {"name", "transposed twin"},
          {"logical", logical},
          {"parallel", parallel}};
}

TEST(UnreadCut, ACutTheStageReadsIsDefinedFromAnotherCutThroughTransposes) {
  const Plan plan = parse(transposed_twin_plan(), "transposed-twin");
  EXPECT_TRUE(computes(plan, unit_of(plan, cut_units(plan), "y"), "g"));
  const Report r = verify_plan(plan, options(ClaimInference::Off));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(UnreadCut, ATransposedTwinMultipliedByTheWrongValueIsStillFound) {
  const Report r = verify_plan(parse(transposed_twin_plan(true), "transposed-twin-bug"), options());
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings[0].tensor, "y") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
