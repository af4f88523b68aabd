// Restricted claims ("over"): a parallel tensor holds a contraction's partial
// sum over a sub-box of its index box. Data parallelism with gradient
// accumulation is the case they exist for: each micro-batch's weight
// gradient and each rank's accumulated gradient claim their rows, so every
// stage stays as small as one rank's work instead of holding every rank and
// micro-batch at once.
#include <gtest/gtest.h>

#include <string>

#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/graph_text.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

// What the generated plan gets wrong.
enum class Bug {
  kNone,
  kAccumulatesOneMicroBatchTwice,  // rank 1 adds micro-batch 0 twice
  kClaimsTheWrongRows,             // rank 1's accumulation claims rank 0's rows
  kAveragesInsteadOfSums,          // the all-reduce averages the ranks' sums
  kNoRestrictedClaims,             // correct, but only the all-reduced gradient is claimed
};

// How the rows are laid out over ranks and micro-batches.
enum class Rows {
  kRankMajor,        // a rank's micro-batches are one block of rows
  kMicroBatchMajor,  // one micro-batch's rows over every rank are a block (MoE)
};

// dW = x^T dy (matmul) or dW = sum over rows of x * dy (sum), rows split
// over `dp` ranks x `mb` micro-batches of `n` rows; every rank accumulates
// its micro-batches and all-reduces. Under micro-batch-major rows a rank's
// sum claims its blocks, n*dp rows apart ([lo, hi, step, count]).
json gradient_plan(const std::string& contraction, int dp, int mb, Bug bug, int n = 2,
                   Rows layout = Rows::kRankMajor) {
  const bool rank_major = layout == Rows::kRankMajor;
  const int rows = n * dp * mb;
  const bool matmul = contraction == "matmul";
  const json w_shape = matmul ? json{4, 3} : json{3};
  json logical_ops = json::array();
  json logical_tensors = {{"x", {{"shape", {rows, matmul ? 4 : 3}}, {"dtype", "f32"}}},
                          {"dy", {{"shape", {rows, 3}}, {"dtype", "f32"}}},
                          {"dw", {{"shape", w_shape}, {"dtype", "f32"}}}};
  if (matmul) {
    logical_ops.push_back({{"name", "wgrad"},
                           {"op", "matmul"},
                           {"in", {"x", "dy"}},
                           {"out", {"dw"}},
                           {"attrs", {{"transpose_a", true}}}});
  } else {
    logical_tensors["xdy"] = {{"shape", {rows, 3}}, {"dtype", "f32"}};
    logical_ops.push_back({{"name", "xdy"}, {"op", "mul"}, {"in", {"x", "dy"}}, {"out", {"xdy"}}});
    logical_ops.push_back({{"name", "wgrad"},
                           {"op", "sum"},
                           {"in", {"xdy"}},
                           {"out", {"dw"}},
                           {"attrs", {{"dims", {0}}}}});
  }
  const std::string claimed = "dw";
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  json reduce_in = json::array(), reduce_out = json::array(), group = json::array();
  auto over = [&](int lo, int hi) { return json{{lo, hi}}; };
  for (int r = 0; r < dp; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    std::string acc;
    for (int m = 0; m < mb; ++m) {
      const std::string q = p + "mb" + std::to_string(m) + ".";
      const int lo = n * (rank_major ? r * mb + m : m * dp + r);
      const json rows_slice = {{lo, lo + n}, {0, matmul ? 4 : 3}};
      tensors[q + "x"] = {{"shape", {n, matmul ? 4 : 3}},
                          {"dtype", "f32"},
                          {"rank", r},
                          {"of", {{"tensor", "x"}, {"slice", rows_slice}}}};
      tensors[q + "dy"] = {{"shape", {n, 3}},
                           {"dtype", "f32"},
                           {"rank", r},
                           {"of", {{"tensor", "dy"}, {"slice", {{lo, lo + n}, {0, 3}}}}}};
      inputs.push_back(q + "x");
      inputs.push_back(q + "dy");
      tensors[q + "g"] = {{"shape", w_shape}, {"dtype", "f32"}, {"rank", r}};
      if (bug != Bug::kNoRestrictedClaims)
        tensors[q + "g"]["of"] = {{"tensor", claimed}, {"over", over(lo, lo + n)}};
      if (matmul) {
        ops.push_back({{"name", q + "wgrad"},
                       {"op", "matmul"},
                       {"in", {q + "x", q + "dy"}},
                       {"out", {q + "g"}},
                       {"attrs", {{"transpose_a", true}}}});
      } else {
        tensors[q + "xdy"] = {{"shape", {n, 3}}, {"dtype", "f32"}, {"rank", r}};
        ops.push_back({{"name", q + "xdy"},
                       {"op", "mul"},
                       {"in", {q + "x", q + "dy"}},
                       {"out", {q + "xdy"}}});
        ops.push_back({{"name", q + "wgrad"},
                       {"op", "sum"},
                       {"in", {q + "xdy"}},
                       {"out", {q + "g"}},
                       {"attrs", {{"dims", {0}}}}});
      }
      if (m == 0) {
        acc = q + "g";
        continue;
      }
      const std::string next = p + "acc" + std::to_string(m);
      tensors[next] = {{"shape", w_shape}, {"dtype", "f32"}, {"rank", r}};
      const bool twice = bug == Bug::kAccumulatesOneMicroBatchTwice && r == 1 && m == 1;
      ops.push_back({{"name", next},
                     {"op", "add"},
                     {"in", {acc, twice ? p + "mb0.g" : q + "g"}},
                     {"out", {next}}});
      acc = next;
    }
    if (bug != Bug::kNoRestrictedClaims) {
      const int claimed_rank = bug == Bug::kClaimsTheWrongRows && r == 1 ? 0 : r;
      tensors[acc]["of"] = {
          {"tensor", claimed},
          {"over", rank_major ? over(n * claimed_rank * mb, n * (claimed_rank + 1) * mb)
                              : json{{n * claimed_rank, n * claimed_rank + n, n * dp, mb}}}};
    }
    reduce_in.push_back(acc);
    reduce_out.push_back(p + "dw");
    group.push_back(r);
    tensors[p + "dw"] = {
        {"shape", w_shape}, {"dtype", "f32"}, {"rank", r}, {"of", {{"tensor", claimed}}}};
    outputs.push_back(p + "dw");
  }
  ops.push_back({{"name", "dp_all_reduce"},
                 {"op", "all_reduce"},
                 {"in", reduce_in},
                 {"out", reduce_out},
                 {"group", group},
                 {"attrs", {{"reduce", bug == Bug::kAveragesInsteadOfSums ? "mean" : "sum"}}}});
  return {{"format", "shardproof-plan/1"},
          {"name", "restricted-" + contraction},
          {"logical",
           {{"tensors", logical_tensors},
            {"inputs", {"x", "dy"}},
            {"ops", logical_ops},
            {"outputs", {"dw"}}}},
          {"parallel",
           {{"world", dp},
            {"tensors", tensors},
            {"inputs", inputs},
            {"ops", ops},
            {"outputs", outputs}}}};
}

class RestrictedClaim : public ::testing::TestWithParam<std::string> {};

TEST_P(RestrictedClaim, PartialSumsOfACorrectPlanAreProvenStageByStage) {
  const Plan plan = testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kNone));
  // One stage per micro-batch gradient and per rank's sum, plus the
  // all-reduced gradient: none holds more than one rank's work but that one.
  std::vector<Stage> stages = build_stages(plan);
  EXPECT_EQ(stages.size(), 3u * 4 + 3 + 1);
  for (const Stage& s : stages) {
    int parallel_ops = 0;
    for (const StageOp& op : s.ops) parallel_ops += op.parallel;
    EXPECT_LE(parallel_ops, 3) << s.title;
  }
  Report r = verify_plan(plan, {});
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST_P(RestrictedClaim, AMicroBatchAccumulatedTwiceIsFoundAtItsRanksSum) {
  Report r = verify_plan(
      testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kAccumulatesOneMicroBatchTwice)), {});
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings.front();
  EXPECT_NE(f.stage.find("over [8:16]"), std::string::npos) << f.stage;
  EXPECT_EQ(f.parallel_tensors, std::vector<std::string>{"r1.acc3"}) << f.message;
}

TEST_P(RestrictedClaim, BugsAreFoundOnStagesThatReductionShrinks) {
  // 7 rows per micro-batch: reduction keeps 2 of each, the bugs still show.
  for (Bug bug : {Bug::kAccumulatesOneMicroBatchTwice, Bug::kClaimsTheWrongRows}) {
    Report r = verify_plan(testing::parse(gradient_plan(GetParam(), 3, 4, bug, 7)), {});
    EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  }
  const Plan plan = testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kNone, 7));
  Report r = verify_plan(plan, {});
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  std::vector<Stage> stages = build_stages(plan);
  reduce_stage(stages.back());
  EXPECT_TRUE(stages.back().reduced);
  EXPECT_LT(stages.back().element_count(), build_stages(plan).back().element_count());
}

TEST_P(RestrictedClaim, AClaimOnAnotherRanksRowsIsRefuted) {
  Report r =
      verify_plan(testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kClaimsTheWrongRows)), {});
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  bool at_rank_1 = false;
  for (const Finding& f : r.findings)
    at_rank_1 |= f.parallel_tensors == std::vector<std::string>{"r1.acc3"};
  EXPECT_TRUE(at_rank_1) << testing::explain(r);
}

TEST_P(RestrictedClaim, AnAveragedAllReduceIsRefutedAtTheGradient) {
  Report r =
      verify_plan(testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kAveragesInsteadOfSums)), {});
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings.front().tensor, "dw");
}

TEST_P(RestrictedClaim, AgreesWithThePlanThatClaimsOnlyTheWhole) {
  // Without the restricted claims one stage holds every rank and micro-batch.
  const Plan plan = testing::parse(gradient_plan(GetParam(), 3, 4, Bug::kNoRestrictedClaims));
  EXPECT_EQ(build_stages(plan).size(), 1u);
  Report r = verify_plan(plan, {});
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Contractions, RestrictedClaim, ::testing::Values("matmul", "sum"));

// Micro-batch-major rows: a rank's accumulated gradient is a strided claim.
class StridedClaim : public ::testing::TestWithParam<std::string> {
 protected:
  Plan plan(Bug bug, int n = 2) const {
    return testing::parse(gradient_plan(GetParam(), 3, 4, bug, n, Rows::kMicroBatchMajor));
  }
};

TEST_P(StridedClaim, EachRanksSumIsAStageOfItsOwn) {
  const Plan p = plan(Bug::kNone);
  std::vector<Stage> stages = build_stages(p);
  EXPECT_EQ(stages.size(), 3u * 4 + 3 + 1);
  bool strided_title = false;
  for (const Stage& s : stages) {
    int parallel_ops = 0;
    for (const StageOp& op : s.ops) parallel_ops += op.parallel;
    EXPECT_LE(parallel_ops, 3) << s.title;
    strided_title |= s.title.find("over [2:4 step 6 x4]") != std::string::npos;
  }
  EXPECT_TRUE(strided_title);
  Report r = verify_plan(p, {});
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST_P(StridedClaim, BugsAreFoundAtTheRanksSum) {
  for (int n : {2, 7}) {  // 7 rows per block: reduction keeps 2 of each
    Report twice = verify_plan(plan(Bug::kAccumulatesOneMicroBatchTwice, n), {});
    ASSERT_EQ(twice.verdict, Verdict::NotEquivalent) << testing::explain(twice);
    EXPECT_EQ(twice.findings.front().parallel_tensors, std::vector<std::string>{"r1.acc3"});
    Report wrong_rows = verify_plan(plan(Bug::kClaimsTheWrongRows, n), {});
    ASSERT_EQ(wrong_rows.verdict, Verdict::NotEquivalent) << testing::explain(wrong_rows);
    bool at_rank_1 = false;
    for (const Finding& f : wrong_rows.findings)
      at_rank_1 |= f.parallel_tensors == std::vector<std::string>{"r1.acc3"};
    EXPECT_TRUE(at_rank_1) << testing::explain(wrong_rows);
  }
  EXPECT_EQ(verify_plan(plan(Bug::kNone, 7), {}).verdict, Verdict::Equivalent);
}

TEST_P(StridedClaim, ReductionShrinksEveryBlock) {
  // 7 rows per block: the rank's sum and the all-reduce keep 2 of each.
  int strided = 0;
  for (Stage& s : build_stages(plan(Bug::kNone, 7))) {
    const bool whole = s.title.find("over") == std::string::npos;
    if (s.title.find("step") == std::string::npos && !whole) continue;
    ++strided;
    const int64_t before = s.element_count();
    reduce_stage(s);
    EXPECT_TRUE(s.reduced) << s.title << ": " << s.reduction_note;
    EXPECT_TRUE(s.reduction_note.empty()) << s.title << ": " << s.reduction_note;
    EXPECT_LT(s.element_count(), before) << s.title;
  }
  EXPECT_EQ(strided, 3 + 1);
}

TEST_P(StridedClaim, AClaimThatSkipsAMicroBatchIsRefuted) {
  // Rank 2 claims only 3 of its 4 blocks.
  json p = gradient_plan(GetParam(), 3, 4, Bug::kNone, 2, Rows::kMicroBatchMajor);
  p["parallel"]["tensors"]["r2.acc3"]["of"]["over"] = {{4, 6, 6, 3}};
  Report r = verify_plan(testing::parse(p), {});
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings.front().parallel_tensors, std::vector<std::string>{"r2.acc3"});
}

INSTANTIATE_TEST_SUITE_P(Contractions, StridedClaim, ::testing::Values("matmul", "sum"));

TEST(RestrictedClaimParsing, StridedSetsMustBeDisjointBlocksInsideTheAxis) {
  json plan = gradient_plan("matmul", 2, 2, Bug::kNone, 2, Rows::kMicroBatchMajor);
  auto error_with = [&](const json& over) -> std::string {
    json p = plan;
    p["parallel"]["tensors"]["r0.acc1"]["of"]["over"] = over;
    ParseResult r = parse_plan_text(p.dump(1), "plan.json", "");
    return r.error ? r.error->to_string() : "";
  };
  EXPECT_EQ(error_with({{0, 2, 4, 2}}), "");
  EXPECT_NE(error_with({{0, 2, 4}}).find("expected [lo, hi] or [lo, hi, step, count]"),
            std::string::npos);
  EXPECT_NE(error_with({{0, 2, 1, 2}}).find("over[0] step: expected an integer in [2, 8]"),
            std::string::npos)
      << error_with({{0, 2, 1, 2}});
  EXPECT_NE(error_with({{0, 2, 4, 3}}).find("3 blocks 0:2 every 4 end past 8"), std::string::npos)
      << error_with({{0, 2, 4, 3}});
  EXPECT_NE(error_with({{0, 2, 4, 0}}).find("over[0] count"), std::string::npos);
}

TEST(RestrictedClaimParsing, ClaimsThatCannotBeRestrictedAreInvalid) {
  json plan = gradient_plan("matmul", 2, 2, Bug::kNone);
  auto error_of = [](const json& p) -> std::string {
    ParseResult r = parse_plan_text(p.dump(1), "plan.json", "");
    return r.error ? r.error->to_string() : "";
  };
  json on_input = plan;  // x is a logical input: no contraction to restrict
  on_input["parallel"]["tensors"]["r0.mb0.g"]["of"]["tensor"] = "x";
  on_input["parallel"]["tensors"]["r0.mb0.g"]["of"]["slice"] = {{0, 4}, {0, 3}};
  EXPECT_NE(error_of(on_input).find("logical input"), std::string::npos) << error_of(on_input);

  json too_many = plan;  // matmul sums over one index axis
  too_many["parallel"]["tensors"]["r0.mb0.g"]["of"]["over"] = {{0, 2}, {0, 2}};
  EXPECT_NE(error_of(too_many).find("1 [lo, hi] pairs"), std::string::npos) << error_of(too_many);

  json out_of_range = plan;
  out_of_range["parallel"]["tensors"]["r0.mb0.g"]["of"]["over"] = {{6, 9}};
  EXPECT_NE(error_of(out_of_range).find("over[0] hi: expected an integer in [7, 8]"),
            std::string::npos)
      << error_of(out_of_range);

  json with_part = plan;
  with_part["parallel"]["tensors"]["r0.mb0.g"]["of"]["part"] = {0, 2};
  EXPECT_NE(error_of(with_part).find("cannot also be a part"), std::string::npos)
      << error_of(with_part);
}

TEST(RestrictedClaimParsing, ARestrictedOutputCoversNothing) {
  // Only the partial sums are outputs: the gradient itself is not covered.
  json plan = gradient_plan("matmul", 2, 2, Bug::kNone);
  plan["parallel"]["outputs"] = {"r0.acc1", "r1.acc1"};
  plan["parallel"]["ops"].erase(plan["parallel"]["ops"].size() - 1);
  for (const char* t : {"r0.dw", "r1.dw"}) plan["parallel"]["tensors"].erase(t);
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "");
  ASSERT_TRUE(r.error);
  EXPECT_NE(r.error->to_string().find("covered by no parallel output"), std::string::npos)
      << r.error->to_string();
}

}  // namespace
}  // namespace shardproof
