// Input-free tensors (engine/infer/input_free.h, engine/prove/input_free_stage.h):
// a causal mask built from two iotas on every rank, applied to the rank's
// rows of attention scores. Its lines are positions that comparisons name,
// so shape reduction keeps them whole, and at a real sequence length the
// stage that applies the mask is too large for the solver. Claiming the
// mask (a stage of its own, decided by one exact evaluation) cuts the
// positions out of the stage that applies it.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/infer/claim_inference.h"
#include "engine/verifier.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

constexpr int kBatch = 4, kSeq = 512;

json tensor(const json& shape, const char* dtype = "f32", int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", dtype}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// The ops of one device: mask = rows >= columns (or, `strict`, rows >
// columns: the diagonal masked too, a bug), y = where(mask, x, -10000).
json masking_ops(const std::string& p, bool strict) {
  return json::array(
      {{{"op", "iota"},
        {"in", json::array()},
        {"out", {p + "rows"}},
        {"attrs", {{"shape", {kSeq, 1}}, {"dim", 0}}}},
       {{"op", "iota"},
        {"in", json::array()},
        {"out", {p + "cols"}},
        {"attrs", {{"shape", {1, kSeq}}, {"dim", 1}}}},
       {{"op", strict ? "gt" : "ge"}, {"in", {p + "rows", p + "cols"}}, {"out", {p + "mask"}}},
       {{"op", "const"},
        {"in", json::array()},
        {"out", {p + "low"}},
        {"attrs", {{"value", -10000}, {"shape", json::array()}}}},
       {{"op", "where"}, {"in", {p + "mask", p + "x", p + "low"}}, {"out", {p + "y"}}}});
}

json masking_tensors(const std::string& p, int rank) {
  json t = json::object();
  t[p + "rows"] = tensor({kSeq, 1}, "i64", rank);
  t[p + "cols"] = tensor({1, kSeq}, "i64", rank);
  t[p + "mask"] = tensor({kSeq, kSeq}, "bool", rank);
  t[p + "low"] = tensor(json::array(), "f32", rank);
  return t;
}

// Two data-parallel ranks, each with half the batch's scores. `strict_rank`
// (0 or 1; -1: none) builds its mask with > instead of >=. `claim_masks`:
// each rank's mask claims the logical one (written by the plan, not inferred).
json causal_plan(int strict_rank, bool claim_masks) {
  json lt = masking_tensors("", -1);
  lt["x"] = tensor({kBatch, kSeq, kSeq});
  lt["y"] = tensor({kBatch, kSeq, kSeq});
  json logical = {
      {"tensors", lt}, {"inputs", {"x"}}, {"ops", masking_ops("", false)}, {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int half = kBatch / 2;
    const json rows = {{half * r, half * r + half}, {0, kSeq}, {0, kSeq}};
    tensors.update(masking_tensors(p, r));
    if (claim_masks) tensors[p + "mask"]["of"] = {{"tensor", "mask"}};
    tensors[p + "x"] = tensor({half, kSeq, kSeq}, "f32", r, {{"tensor", "x"}, {"slice", rows}});
    tensors[p + "y"] = tensor({half, kSeq, kSeq}, "f32", r, {{"tensor", "y"}, {"slice", rows}});
    inputs.push_back(p + "x");
    outputs.push_back(p + "y");
    for (const json& op : masking_ops(p, r == strict_rank)) ops.push_back(op);
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "causal mask"},
          {"logical", logical},
          {"parallel", parallel}};
}

Plan parse(const json& doc, const std::string& stem) {
  return testing::parse_doc(doc, stem);
}

VerifyOptions options(ClaimInference mode) {
  return testing::inference_options(mode);
}

// The trap: without a claim on the mask, the stage that applies it keeps
// both position lines whole and is unknown (never equivalent).
TEST(InputFreeClaims, UnclaimedTheMaskedStageIsTooLargeToDecide) {
  const Report r =
      verify_plan(parse(causal_plan(-1, false), "causal-plain"), options(ClaimInference::Off));
  EXPECT_EQ(r.verdict, Verdict::Unknown) << testing::explain(r);
}

// Claim inference proposes each rank's mask as the logical mask (matched
// on its own, exactly: no input reaches it); the mask's stage is decided by
// exact evaluation and the masked stage, reading a claimed mask, reduces.
TEST(InputFreeClaims, AnInferredMaskClaimCutsThePositionsOut) {
  const Plan plan = parse(causal_plan(-1, false), "causal-infer");
  const infer::InferenceResult inferred = infer::infer_claims(plan);
  std::map<std::string, std::string> claimed;
  for (const infer::InferredClaim& c : inferred.claims)
    claimed[plan.parallel.tensors[static_cast<size_t>(c.parallel)].name] = c.of.tensor;
  EXPECT_EQ(claimed["r0.mask"], "mask");
  EXPECT_EQ(claimed["r1.mask"], "mask");
  // The position tables are not claimed: a free iota would no longer be
  // positions in the stages that read it.
  EXPECT_EQ(claimed.count("r0.rows"), 0u);
  const Report r = verify_plan(plan, options(ClaimInference::On));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.stats.inferred_kept, r.stats.inferred_claims);
}

// A rank whose mask also hides the diagonal: its mask matches no logical
// tensor, and the outputs differ.
TEST(InputFreeClaims, AMaskOffByTheDiagonalIsNotEquivalent) {
  const Report r =
      verify_plan(parse(causal_plan(1, false), "causal-infer-bug"), options(ClaimInference::On));
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
}

// Written claims on the masks: the masks' stages (over the solver's limit,
// no input) are proven by one exact evaluation at full size (they were
// unknown before); a wrong mask is refuted on its diagonal.
TEST(InputFreeClaims, AMaskStageIsDecidedByExactEvaluation) {
  const Report ok =
      verify_plan(parse(causal_plan(-1, true), "causal-claimed"), options(ClaimInference::Off));
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);

  const Report bug =
      verify_plan(parse(causal_plan(1, true), "causal-claimed-bug"), options(ClaimInference::Off));
  ASSERT_EQ(bug.verdict, Verdict::NotEquivalent) << testing::explain(bug);
  const Finding& f = bug.findings.at(0);
  EXPECT_EQ(f.tensor, "mask") << testing::explain(bug);
  EXPECT_EQ(f.parallel_tensors, std::vector<std::string>{"r1.mask"}) << testing::explain(bug);
  // Every failing element is on the diagonal, at full size.
  ASSERT_FALSE(f.elements.empty());
  for (const std::vector<int64_t>& e : f.elements) {
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0], e[1]);
  }
}

}  // namespace
}  // namespace shardproof
