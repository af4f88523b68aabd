// Each test is a plan that would be reported *equivalent* if the rule named
// in docs/soundness.md ("Rules, and the trap each one closes") were missing,
// next to its correct twin that must stay equivalent.
#include <gtest/gtest.h>

#include "engine/format/plan_parser.h"
#include "engine/prove/stage_prover.h"
#include "engine/stage/shape_reduction.h"
#include "tests/graph_text.h"
#include "tests/position_plans.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::explain;
using testing::verify_json;

json tensor(json shape, const std::string& dtype = "f32") {
  return {{"shape", shape}, {"dtype", dtype}};
}
json ptensor(json shape, int rank, json of = nullptr, const std::string& dtype = "f32") {
  json t = {{"shape", shape}, {"dtype", dtype}, {"rank", rank}};
  if (!of.is_null()) t["of"] = of;
  return t;
}
json op(const std::string& name, const std::string& kind, json in, json out,
        json attrs = json::object()) {
  return {{"name", name}, {"op", kind}, {"in", in}, {"out", out}, {"attrs", attrs}};
}
json plan(json logical, json parallel) {
  return {{"format", "shardproof-plan/1"},
          {"name", "test"},
          {"logical", logical},
          {"parallel", parallel}};
}

// Row reduction over x[4,8], columns split over 2 ranks; each rank reduces
// its columns with `local` and the partial results are all-reduced with `global`.
json column_split_reduction(const std::string& logical_op, const std::string& local,
                            const std::string& global, json scale_factor = nullptr) {
  json logical = {{"tensors", {{"x", tensor({4, 8})}, {"y", tensor({4})}}},
                  {"inputs", {"x"}},
                  {"ops", {op("reduce", logical_op, {"x"}, {"y"}, {{"dims", {1}}})}},
                  {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array();
  for (int r = 0; r < 2; ++r) {
    std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "x"] =
        ptensor({4, 4}, r, {{"tensor", "x"}, {"slice", {{0, 4}, {4 * r, 4 * r + 4}}}});
    tensors[p + "local"] = ptensor({4}, r);
    tensors[p + "reduced"] =
        ptensor({4}, r, scale_factor.is_null() ? json{{"tensor", "y"}} : json());
    ops.push_back(op(p + "local", local, {p + "x"}, {p + "local"}, {{"dims", {1}}}));
  }
  ops.push_back({{"name", "allreduce"},
                 {"op", "all_reduce"},
                 {"in", {"r0.local", "r1.local"}},
                 {"out", {"r0.reduced", "r1.reduced"}},
                 {"attrs", {{"reduce", global}}},
                 {"group", {0, 1}}});
  json outputs = {"r0.reduced", "r1.reduced"};
  if (!scale_factor.is_null()) {
    outputs = json::array();
    for (int r = 0; r < 2; ++r) {
      std::string p = "r" + std::to_string(r) + ".";
      tensors[p + "y"] = ptensor({4}, r, {{"tensor", "y"}});
      ops.push_back(
          op(p + "scale", "scale", {p + "reduced"}, {p + "y"}, {{"factor", scale_factor}}));
      outputs.push_back(p + "y");
    }
  }
  json parallel = {{"world", 2},
                   {"tensors", tensors},
                   {"inputs", {"r0.x", "r1.x"}},
                   {"ops", ops},
                   {"outputs", outputs}};
  return plan(logical, parallel);
}

TEST(Soundness, MaxVersusSumNeedsTwoElementPieces) {
  Report good = verify_json(column_split_reduction("max", "max", "max"), "max-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(column_split_reduction("max", "sum", "max"), "max-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "y");
}

TEST(Soundness, MeanUsesFullCount) {
  Report good = verify_json(column_split_reduction("mean", "sum", "sum", "1/8"), "mean-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  // 1/4 is what a mean over the *reduced* row (4 columns) would divide by.
  Report bad = verify_json(column_split_reduction("mean", "sum", "sum", "1/4"), "mean-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "y");
}

// The mean of a row of `cols` written as a local sum scaled by `factor`.
// At 8 and 16 columns the stage reduces to the same 2-column stage; only the
// full-size count tells them apart.
json mean_as_scaled_sum(int64_t cols, const std::string& factor) {
  json logical = {{"tensors", {{"x", tensor({cols})}, {"y", tensor(json::array())}}},
                  {"inputs", {"x"}},
                  {"ops", {op("mean", "mean", {"x"}, {"y"})}},
                  {"outputs", {"y"}}};
  json parallel = {{"world", 1},
                   {"tensors",
                    {{"r.x", ptensor({cols}, 0, {{"tensor", "x"}})},
                     {"r.s", ptensor(json::array(), 0)},
                     {"r.y", ptensor(json::array(), 0, {{"tensor", "y"}})}}},
                   {"inputs", {"r.x"}},
                   {"ops",
                    {op("sum", "sum", {"r.x"}, {"r.s"}),
                     op("scale", "scale", {"r.s"}, {"r.y"}, {{"factor", factor}})}},
                   {"outputs", {"r.y"}}};
  return plan(logical, parallel);
}

// The class verifier accepts a box when its corners' stages have equal
// verdict keys, and the engine may decide a stage from another with its
// verdict key: the key must cover the full-size count a mean divides by.
TEST(Soundness, VerdictKeysCoverTheMeansFullCount) {
  auto key = [](const json& p, Verdict expected) {
    StageRecord record;
    Report r = verify_plan(testing::parse(p), VerifyOptions{}, record);
    EXPECT_EQ(r.verdict, expected) << explain(r);
    return record.verdict_keys.empty() ? std::string() : record.verdict_keys.back();
  };
  const std::string right = key(mean_as_scaled_sum(8, "1/8"), Verdict::Equivalent);
  const std::string wrong = key(mean_as_scaled_sum(16, "1/8"), Verdict::NotEquivalent);
  EXPECT_FALSE(right.empty());
  EXPECT_NE(right, wrong);
  // Same full sizes, same reduced stage: one key (the key is not a stage id).
  EXPECT_EQ(wrong, key(mean_as_scaled_sum(16, "1/8"), Verdict::NotEquivalent));
}

// Causal mask over 8 rows split over 2 ranks; rank 1 must offset its local
// row positions by 4. An offset of 2 is wrong, but equals rank 1's row
// offset at the reduced size (two rows per piece).
json causal_mask(int rank1_offset) {
  json logical = {{"tensors",
                   {{"x", tensor({8, 8})},
                    {"row", tensor({8, 8}, "i64")},
                    {"col", tensor({8, 8}, "i64")},
                    {"mask", tensor({8, 8}, "bool")},
                    {"zero", tensor({8, 8})},
                    {"y", tensor({8, 8})}}},
                  {"inputs", {"x"}},
                  {"ops",
                   {op("row", "iota", json::array(), {"row"}, {{"shape", {8, 8}}, {"dim", 0}}),
                    op("col", "iota", json::array(), {"col"}, {{"shape", {8, 8}}, {"dim", 1}}),
                    op("mask", "ge", {"row", "col"}, {"mask"}),
                    op("zero", "const", json::array(), {"zero"},
                       {{"value", 0}, {"shape", {8, 8}}, {"dtype", "f32"}}),
                    op("y", "where", {"mask", "x", "zero"}, {"y"})}},
                  {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), outputs = json::array(),
       inputs = json::array();
  for (int r = 0; r < 2; ++r) {
    std::string p = "r" + std::to_string(r) + ".";
    int offset = r == 0 ? 0 : rank1_offset;
    tensors[p + "x"] =
        ptensor({4, 8}, r, {{"tensor", "x"}, {"slice", {{4 * r, 4 * r + 4}, {0, 8}}}});
    tensors[p + "local_row"] = ptensor({4, 8}, r, nullptr, "i64");
    tensors[p + "offset"] = ptensor({4, 8}, r, nullptr, "i64");
    tensors[p + "row"] = ptensor({4, 8}, r, nullptr, "i64");
    tensors[p + "col"] = ptensor({4, 8}, r, nullptr, "i64");
    tensors[p + "mask"] = ptensor({4, 8}, r, nullptr, "bool");
    tensors[p + "zero"] = ptensor({4, 8}, r);
    tensors[p + "y"] =
        ptensor({4, 8}, r, {{"tensor", "y"}, {"slice", {{4 * r, 4 * r + 4}, {0, 8}}}});
    ops.push_back(op(p + "local_row", "iota", json::array(), {p + "local_row"},
                     {{"shape", {4, 8}}, {"dim", 0}}));
    ops.push_back(op(p + "offset", "const", json::array(), {p + "offset"},
                     {{"value", offset}, {"shape", {4, 8}}, {"dtype", "i64"}}));
    ops.push_back(op(p + "row", "add", {p + "local_row", p + "offset"}, {p + "row"}));
    ops.push_back(
        op(p + "col", "iota", json::array(), {p + "col"}, {{"shape", {4, 8}}, {"dim", 1}}));
    ops.push_back(op(p + "mask", "ge", {p + "row", p + "col"}, {p + "mask"}));
    ops.push_back(op(p + "zero", "const", json::array(), {p + "zero"},
                     {{"value", 0}, {"shape", {4, 8}}, {"dtype", "f32"}}));
    ops.push_back(op(p + "y", "where", {p + "mask", p + "x", p + "zero"}, {p + "y"}));
    inputs.push_back(p + "x");
    outputs.push_back(p + "y");
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return plan(logical, parallel);
}

TEST(Soundness, IotaOffsetNeedsFullPositions) {
  Report good = verify_json(causal_mask(4), "iota-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(causal_mask(2), "iota-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "y");
}

// y = sum(expand(x[1,4] -> [8,4]), dim 0) = 8x; the parallel side (one
// rank) computes scale(x, factor).
json expanded_sum(int factor) {
  json logical = {{"tensors", {{"x", tensor({1, 4})}, {"e", tensor({8, 4})}, {"y", tensor({4})}}},
                  {"inputs", {"x"}},
                  {"ops",
                   {op("e", "expand", {"x"}, {"e"}, {{"shape", {8, 4}}}),
                    op("y", "sum", {"e"}, {"y"}, {{"dims", {0}}})}},
                  {"outputs", {"y"}}};
  json parallel = {{"world", 1},
                   {"tensors",
                    {{"p.x", ptensor({1, 4}, 0, {{"tensor", "x"}})},
                     {"p.flat", ptensor({4}, 0)},
                     {"p.y", ptensor({4}, 0, {{"tensor", "y"}})}}},
                   {"inputs", {"p.x"}},
                   {"ops",
                    {op("flat", "reshape", {"p.x"}, {"p.flat"}, {{"shape", {4}}}),
                     op("scale", "scale", {"p.flat"}, {"p.y"}, {{"factor", factor}})}},
                   {"outputs", {"p.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, ExpandedAxisIsNotReduced) {
  Report good = verify_json(expanded_sum(8), "expand-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(expanded_sum(2), "expand-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// y = sum(x[1,4] + z[8,4], dim 0) = 8x + sum(z); the parallel side adds
// scale(x, factor) to its own sum of z. x is repeated along dim 0 by
// implicit broadcasting, so reducing that line would turn 8x into 2x.
json broadcast_sum(int factor) {
  json logical = {
      {"tensors",
       {{"x", tensor({1, 4})}, {"z", tensor({8, 4})}, {"e", tensor({8, 4})}, {"y", tensor({4})}}},
      {"inputs", {"x", "z"}},
      {"ops", {op("e", "add", {"x", "z"}, {"e"}), op("y", "sum", {"e"}, {"y"}, {{"dims", {0}}})}},
      {"outputs", {"y"}}};
  json parallel = {{"world", 1},
                   {"tensors",
                    {{"p.x", ptensor({1, 4}, 0, {{"tensor", "x"}})},
                     {"p.z", ptensor({8, 4}, 0, {{"tensor", "z"}})},
                     {"p.flat", ptensor({4}, 0)},
                     {"p.xs", ptensor({4}, 0)},
                     {"p.zs", ptensor({4}, 0)},
                     {"p.y", ptensor({4}, 0, {{"tensor", "y"}})}}},
                   {"inputs", {"p.x", "p.z"}},
                   {"ops",
                    {op("flat", "reshape", {"p.x"}, {"p.flat"}, {{"shape", {4}}}),
                     op("xs", "scale", {"p.flat"}, {"p.xs"}, {{"factor", factor}}),
                     op("zs", "sum", {"p.z"}, {"p.zs"}, {{"dims", {0}}}),
                     op("y", "add", {"p.xs", "p.zs"}, {"p.y"})}},
                   {"outputs", {"p.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, BroadcastThenSummedAxisIsNotReduced) {
  Report good = verify_json(broadcast_sum(8), "bcast-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(broadcast_sum(2), "bcast-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// y = x / (x - x): every denominator is zero, so "nonzero denominators"
// contradicts itself and any claim would be vacuously proven.
TEST(Soundness, ContradictoryAssumptionsAreUnknown) {
  json logical = {{"tensors", {{"x", tensor({2})}, {"z", tensor({2})}, {"y", tensor({2})}}},
                  {"inputs", {"x"}},
                  {"ops", {op("z", "sub", {"x", "x"}, {"z"}), op("y", "div", {"x", "z"}, {"y"})}},
                  {"outputs", {"y"}}};
  json parallel = {
      {"world", 1},
      {"tensors",
       {{"p.x", ptensor({2}, 0, {{"tensor", "x"}})}, {"p.y", ptensor({2}, 0, {{"tensor", "y"}})}}},
      {"inputs", {"p.x"}},
      {"ops", {op("wrong", "neg", {"p.x"}, {"p.y"})}},
      {"outputs", {"p.y"}}};
  Report r = verify_json(plan(logical, parallel), "vacuous");
  EXPECT_EQ(r.verdict, Verdict::Unknown) << explain(r);
  // The reason names the op (a softmax over a row masked everywhere
  // captured from torch: NaN there), not only "assumptions contradict".
  ASSERT_FALSE(r.findings.empty());
  EXPECT_NE(r.findings[0].message.find("logical op y divides by zero for every input"),
            std::string::npos)
      << explain(r);
  EXPECT_EQ(r.findings[0].tensor, "y");
}

// A proof under denominators needs those denominators to be nonzero
// together (else it is vacuous). Random values that run the stage inside
// its domain show they can be, so the stage takes one query (its claim),
// not two. Before, a satisfiability query was always asked, and at GPT
// sizes (an Adam update of 131,072 elements, each divided by its own
// sqrt(v) + eps) the solver gave up on it and the stage was reported as
// vacuous.
TEST(Soundness, DenominatorsShownNonzeroTogetherByTestingNeedNoQuery) {
  json logical = {{"tensors", {{"x", tensor({4})}, {"z", tensor({4})}, {"y", tensor({4})}}},
                  {"inputs", {"x", "z"}},
                  {"ops", {op("y", "div", {"x", "z"}, {"y"})}},
                  {"outputs", {"y"}}};
  json parallel = {
      {"world", 1},
      {"tensors",
       {{"p.x", ptensor({4}, 0, {{"tensor", "x"}})},
        {"p.z", ptensor({4}, 0, {{"tensor", "z"}})},
        {"p.r", ptensor({4}, 0)},
        {"p.y", ptensor({4}, 0, {{"tensor", "y"}})}}},
      {"inputs", {"p.x", "p.z"}},
      {"ops",
       {op("p.r", "reciprocal", {"p.z"}, {"p.r"}), op("p.y", "mul", {"p.x", "p.r"}, {"p.y"})}},
      {"outputs", {"p.y"}}};
  ParseResult parsed = parse_plan_text(plan(logical, parallel).dump(), "plan.json", "");
  ASSERT_TRUE(parsed.plan);
  std::vector<Stage> stages = build_stages(*parsed.plan);
  ASSERT_EQ(stages.size(), 1u);
  reduce_stage(stages[0]);
  const StageOutcome out = prove_stage(stages[0], ProverOptions{});
  EXPECT_EQ(out.status, StageStatus::Proven);
  EXPECT_EQ(out.queries, 1);
}

// The same division on the parallel side only: the logical step is defined,
// the rank's is not (NaN in torch). Still no proof, and the rank's op is named.
TEST(Soundness, AParallelOpDividingByZeroEverywhereIsUnknownAndNamed) {
  json logical = {{"tensors", {{"x", tensor({2})}, {"y", tensor({2})}}},
                  {"inputs", {"x"}},
                  {"ops", {op("y", "neg", {"x"}, {"y"})}},
                  {"outputs", {"y"}}};
  json parallel = {
      {"world", 1},
      {"tensors",
       {{"p.x", ptensor({2}, 0, {{"tensor", "x"}})},
        {"p.z", ptensor({2}, 0)},
        {"p.y", ptensor({2}, 0, {{"tensor", "y"}})}}},
      {"inputs", {"p.x"}},
      {"ops",
       {op("zero", "sub", {"p.x", "p.x"}, {"p.z"}), op("nan", "div", {"p.x", "p.z"}, {"p.y"})}},
      {"outputs", {"p.y"}}};
  Report r = verify_json(plan(logical, parallel), "vacuous-parallel");
  EXPECT_EQ(r.verdict, Verdict::Unknown) << explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_NE(r.findings[0].message.find("parallel op"), std::string::npos) << explain(r);
  ASSERT_EQ(r.findings[0].ops.size(), 1u) << explain(r);
  EXPECT_NE(r.findings[0].ops[0].find("nan"), std::string::npos) << explain(r);
}

// ---------------------------------------------------------------- integer positions
// Vocabulary lines whose positions token ids name (docs/soundness.md,
// "Integer positions"). The correct plans reduce (ShapeReduction.Vocab*);
// each bug below must be refuted.

namespace positions = testing::positions;

Report verify_embedding(const positions::VocabPlan& c, const std::string& stem) {
  return verify_json(positions::vocab_parallel_embedding(c), stem);
}

// Rank 1 subtracts lo + 1: its rows are shifted by one. lo + 1 is no
// boundary, so the vocabulary keeps full size (64 here, to stay small) and
// the bug shows; mapping the constant to its piece start would make the
// reduced plan identical to the correct one.
TEST(Soundness, VocabShardOffsetMustBeABoundary) {
  positions::VocabPlan c;
  c.vocab = 64;
  Report good = verify_embedding(c, "offset-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  c.offset_error = 1;
  Report bad = verify_embedding(c, "offset-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "out");
  positions::VocabPlan target;
  target.vocab = 64;
  target.offset_error = 1;
  Report picked = verify_json(positions::vocab_parallel_target_logits(target), "offset-target");
  EXPECT_EQ(picked.verdict, Verdict::NotEquivalent) << explain(picked);
}

// Rank 1 masks ids > lo instead of ids >= lo: the token whose id is the
// shard's first row gets no embedding. Written with the boundary (gt lo) it
// is refuted at the reduced size, where the first row of the shard is a
// reduced position of its own; written as ids >= lo + 1 the constant is no
// boundary and the line keeps full size.
TEST(Soundness, VocabMaskOffByOne) {
  positions::VocabPlan strict;
  strict.strict_mask = true;
  Report bad = verify_embedding(strict, "mask-strict");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "out");
  // Every counterexample needs a token on row 25000, reported at full size.
  const json& ids = bad.findings[0].counterexample["inputs"]["ids"];
  ASSERT_TRUE(ids.contains("full_values")) << ids.dump();
  bool first_row = false;
  for (const json& v : ids["full_values"]) first_row |= v == 25000;
  EXPECT_TRUE(first_row) << ids.dump();
  positions::VocabPlan shifted;
  shifted.vocab = 64;
  shifted.mask_error = 1;
  Report bad_shifted = verify_embedding(shifted, "mask-shifted");
  ASSERT_EQ(bad_shifted.verdict, Verdict::NotEquivalent) << explain(bad_shifted);
}

// Both ranks handle the other rank's range with their own table shard.
// The ids' offset then disagrees with the shard's rows (a conflict), so the
// line keeps full size, where the bug shows.
TEST(Soundness, VocabShardOrderSwapped) {
  positions::VocabPlan c;
  c.vocab = 64;
  c.swap_shards = true;
  Report bad = verify_embedding(c, "swapped");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  Report backward = verify_json(positions::vocab_parallel_onehot_backward(c), "swapped-onehot");
  ASSERT_EQ(backward.verdict, Verdict::NotEquivalent) << explain(backward);
}

// Rank 1 adds all its tokens' dy to every row it hits: right whenever its
// tokens share one id, wrong as soon as two different ids fall in its
// shard. With pieces of 1 row two ids in one shard would be the same id.
TEST(Soundness, TwoIdsInOneShardNeedTwoRowsPerPiece) {
  positions::VocabPlan c;
  Report good = verify_json(positions::vocab_parallel_onehot_backward(c), "accumulate-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  c.shard_accumulate = true;
  Report bad = verify_json(positions::vocab_parallel_onehot_backward(c), "accumulate-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "grad");
}

// Rank 1 adds dy[0] to the untouched rows of its shard when tokens 0 and 1
// hit two different rows of it. The bug needs both ids and one more row in
// one piece: pieces of 2 would hide it; K + 2 rows (K = the ids) show it.
TEST(Soundness, PositionPiecesKeepTheIdsAndTwoMore) {
  positions::VocabPlan c;
  c.untouched_rows = true;
  Report bad = verify_json(positions::vocab_parallel_onehot_backward(c), "untouched-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  EXPECT_EQ(bad.findings[0].tensor, "grad");
}

// y = sum over rows of iota([8, 4], dim 1) = 8 * column; the parallel side
// scales its own iota by 2, the row count at the reduced size. iota repeats
// its values along every other axis, like const, so the rows keep full size.
json iota_row_sum(int factor) {
  json logical = {
      {"tensors", {{"pos", tensor({8, 4}, "i64")}, {"posf", tensor({8, 4})}, {"y", tensor({4})}}},
      {"inputs", json::array()},
      {"ops",
       {op("pos", "iota", json::array(), {"pos"}, {{"shape", {8, 4}}, {"dim", 1}}),
        op("posf", "cast", {"pos"}, {"posf"}, {{"dtype", "f32"}}),
        op("y", "sum", {"posf"}, {"y"}, {{"dims", {0}}})}},
      {"outputs", {"y"}}};
  json parallel = {{"world", 1},
                   {"tensors",
                    {{"p.pos", ptensor({4}, 0, nullptr, "i64")},
                     {"p.posf", ptensor({4}, 0)},
                     {"p.y", ptensor({4}, 0, {{"tensor", "y"}})}}},
                   {"inputs", json::array()},
                   {"ops",
                    {op("pos", "iota", json::array(), {"p.pos"}, {{"shape", {4}}, {"dim", 0}}),
                     op("posf", "cast", {"p.pos"}, {"p.posf"}, {{"dtype", "f32"}}),
                     op("scale", "scale", {"p.posf"}, {"p.y"}, {{"factor", factor}})}},
                   {"outputs", {"p.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, IotaRepeatsAlongItsOtherAxes) {
  Report good = verify_json(iota_row_sum(8), "iota-rows-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(iota_row_sum(2), "iota-rows-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// y = the number of rows where the one-hots of ids and lbl agree: V - 2 for
// two different ids, V for equal ones (the embeddings only make the ids
// valid positions). The parallel side writes it with the constant 2, which
// is right when the vocabulary has 4 rows. eq(ids[1, 1], iota[1, V]) is 0
// off the ids' rows, a value repeated along the vocabulary: summed over it,
// it counts rows, so the vocabulary keeps full size.
json agreeing_rows(int64_t vocab) {
  auto common = [&](const std::string& p, json& tensors, json& ops) {
    tensors[p + "ic"] = tensor({1, 1}, "i64");
    tensors[p + "lc"] = tensor({1, 1}, "i64");
    tensors[p + "ea"] = tensor({1, 1});
    tensors[p + "eb"] = tensor({1, 1});
    tensors[p + "d"] = tensor({1, 1});
    tensors[p + "z"] = tensor({1, 1});
    tensors[p + "zr"] = tensor({1});
    ops.push_back(op(p + "ic", "reshape", {p + "ids"}, {p + "ic"}, {{"shape", {1, 1}}}));
    ops.push_back(op(p + "lc", "reshape", {p + "lbl"}, {p + "lc"}, {{"shape", {1, 1}}}));
    ops.push_back(op(p + "ea", "embedding", {p + "ids", p + "table"}, {p + "ea"}));
    ops.push_back(op(p + "eb", "embedding", {p + "lbl", p + "table"}, {p + "eb"}));
    ops.push_back(op(p + "d", "sub", {p + "ea", p + "eb"}, {p + "d"}));
    ops.push_back(op(p + "z", "scale", {p + "d"}, {p + "z"}, {{"factor", 0}}));
    ops.push_back(op(p + "zr", "reshape", {p + "z"}, {p + "zr"}, {{"shape", {1}}}));
  };
  json lt = {{"ids", tensor({1}, "i64")},
             {"lbl", tensor({1}, "i64")},
             {"table", tensor({vocab, 1})},
             {"iota", tensor({1, vocab}, "i64")},
             {"ha", tensor({1, vocab}, "bool")},
             {"hb", tensor({1, vocab}, "bool")},
             {"agree", tensor({1, vocab}, "bool")},
             {"af", tensor({1, vocab})},
             {"count", tensor({1})},
             {"y", tensor({1})}};
  json lops = json::array();
  common("", lt, lops);
  for (json o : {op("iota", "iota", json::array(), {"iota"}, {{"shape", {1, vocab}}, {"dim", 1}}),
                 op("ha", "eq", {"ic", "iota"}, {"ha"}), op("hb", "eq", {"lc", "iota"}, {"hb"}),
                 op("agree", "eq", {"ha", "hb"}, {"agree"}),
                 op("af", "cast", {"agree"}, {"af"}, {{"dtype", "f32"}}),
                 op("count", "sum", {"af"}, {"count"}, {{"dims", {1}}}),
                 op("y", "add", {"count", "zr"}, {"y"})})
    lops.push_back(o);
  json logical = {
      {"tensors", lt}, {"inputs", {"ids", "lbl", "table"}}, {"ops", lops}, {"outputs", {"y"}}};
  json pt = json::object(), pops = json::array();
  common("p.", pt, pops);
  for (auto& [name, t] : pt.items()) t["rank"] = 0;
  pt["p.ids"] = ptensor({1}, 0, {{"tensor", "ids"}}, "i64");
  pt["p.lbl"] = ptensor({1}, 0, {{"tensor", "lbl"}}, "i64");
  pt["p.table"] = ptensor({vocab, 1}, 0, {{"tensor", "table"}});
  pt["p.same"] = ptensor({1}, 0, nullptr, "bool");
  pt["p.sf"] = ptensor({1}, 0);
  pt["p.twice"] = ptensor({1}, 0);
  pt["p.two"] = ptensor(json::array(), 0);
  pt["p.count"] = ptensor({1}, 0);
  pt["p.y"] = ptensor({1}, 0, {{"tensor", "y"}});
  for (json o : {op("p.same", "eq", {"p.ids", "p.lbl"}, {"p.same"}),
                 op("p.sf", "cast", {"p.same"}, {"p.sf"}, {{"dtype", "f32"}}),
                 op("p.twice", "scale", {"p.sf"}, {"p.twice"}, {{"factor", 2}}),
                 op("p.two", "const", json::array(), {"p.two"},
                    {{"value", 2}, {"shape", json::array()}, {"dtype", "f32"}}),
                 op("p.count", "add", {"p.twice", "p.two"}, {"p.count"}),
                 op("p.y", "add", {"p.count", "p.zr"}, {"p.y"})})
    pops.push_back(o);
  json parallel = {{"world", 1},
                   {"tensors", pt},
                   {"inputs", {"p.ids", "p.lbl", "p.table"}},
                   {"ops", pops},
                   {"outputs", {"p.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, OneHotRepeatsAlongTheVocabulary) {
  Report four = verify_json(agreeing_rows(4), "agree-4");
  EXPECT_EQ(four.verdict, Verdict::Equivalent) << explain(four);
  Report bad = verify_json(agreeing_rows(16), "agree-16");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// y = sum over tokens of (ids - 1) as numbers = sum(ids) - T; the parallel
// side subtracts 2, the token count at the reduced size. ids - 1 repeats
// the constant along the tokens; that is harmless while the result is only
// used as a position, but here it is summed as a number (which also keeps
// the vocabulary at full size), so the tokens keep full size.
json shifted_ids_summed(int64_t subtract) {
  const int64_t T = 8, V = 8;
  auto common = [&](const std::string& p, json& tensors, json& ops) {
    tensors[p + "e"] = tensor({T, 1});
    tensors[p + "es"] = tensor({1});
    tensors[p + "z"] = tensor({1});
    ops.push_back(op(p + "e", "embedding", {p + "ids", p + "table"}, {p + "e"}));
    ops.push_back(op(p + "es", "sum", {p + "e"}, {p + "es"}, {{"dims", {0}}}));
    ops.push_back(op(p + "z", "scale", {p + "es"}, {p + "z"}, {{"factor", 0}}));
  };
  json lt = {
      {"ids", tensor({T}, "i64")}, {"table", tensor({V, 1})}, {"one", tensor(json::array(), "i64")},
      {"s", tensor({T}, "i64")},   {"sf", tensor({T})},       {"total", tensor(json::array())},
      {"y", tensor({1})}};
  json lops = {op("one", "const", json::array(), {"one"},
                  {{"value", 1}, {"shape", json::array()}, {"dtype", "i64"}}),
               op("s", "sub", {"ids", "one"}, {"s"}),
               op("sf", "cast", {"s"}, {"sf"}, {{"dtype", "f32"}}),
               op("total", "sum", {"sf"}, {"total"}), op("y", "add", {"total", "z"}, {"y"})};
  common("", lt, lops);
  json logical = {{"tensors", lt}, {"inputs", {"ids", "table"}}, {"ops", lops}, {"outputs", {"y"}}};
  json pt = json::object(), pops = json::array();
  common("p.", pt, pops);
  for (auto& [name, t] : pt.items()) t["rank"] = 0;
  pt["p.ids"] = ptensor({T}, 0, {{"tensor", "ids"}}, "i64");
  pt["p.table"] = ptensor({V, 1}, 0, {{"tensor", "table"}});
  pt["p.idf"] = ptensor({T}, 0);
  pt["p.total"] = ptensor(json::array(), 0);
  pt["p.k"] = ptensor(json::array(), 0);
  pt["p.less"] = ptensor(json::array(), 0);
  pt["p.y"] = ptensor({1}, 0, {{"tensor", "y"}});
  for (json o : {op("p.idf", "cast", {"p.ids"}, {"p.idf"}, {{"dtype", "f32"}}),
                 op("p.total", "sum", {"p.idf"}, {"p.total"}),
                 op("p.k", "const", json::array(), {"p.k"},
                    {{"value", subtract}, {"shape", json::array()}, {"dtype", "f32"}}),
                 op("p.less", "sub", {"p.total", "p.k"}, {"p.less"}),
                 op("p.y", "add", {"p.less", "p.z"}, {"p.y"})})
    pops.push_back(o);
  json parallel = {{"world", 1},
                   {"tensors", pt},
                   {"inputs", {"p.ids", "p.table"}},
                   {"ops", pops},
                   {"outputs", {"p.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, ShiftedIdsUsedAsNumbersKeepTheTokens) {
  Report good = verify_json(shifted_ids_summed(8), "shift-sum-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(shifted_ids_summed(2), "shift-sum-bad");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// Closed by section 3.2 of docs/soundness.md (comparisons never vary):
// comparison results are 0/1 indicators with identities such as
// eq(p, q) = 1 - p - q + 2pq for booleans, so a sum of them over a piece can
// expose the piece's length with no broadcast anywhere. Here the sum over 8
// tokens of eq(p, q) is written as 2 - sum(p) - sum(q) + 2 sum(pq): right at
// the reduced size (2 tokens), wrong at 8: the token line keeps its size.
TEST(Soundness, ComparisonIndicatorsCountThePiece) {
  const int64_t T = 8;
  json logical = {
      {"tensors",
       {{"p", tensor({T}, "bool")},
        {"q", tensor({T}, "bool")},
        {"same", tensor({T}, "bool")},
        {"sf", tensor({T})},
        {"y", tensor(json::array())}}},
      {"inputs", {"p", "q"}},
      {"ops",
       {op("same", "eq", {"p", "q"}, {"same"}),
        op("sf", "cast", {"same"}, {"sf"}, {{"dtype", "f32"}}), op("y", "sum", {"sf"}, {"y"})}},
      {"outputs", {"y"}}};
  json pt = {{"r.p", ptensor({T}, 0, {{"tensor", "p"}}, "bool")},
             {"r.q", ptensor({T}, 0, {{"tensor", "q"}}, "bool")},
             {"r.pf", ptensor({T}, 0)},
             {"r.qf", ptensor({T}, 0)},
             {"r.pq", ptensor({T}, 0)},
             {"r.sp", ptensor(json::array(), 0)},
             {"r.sq", ptensor(json::array(), 0)},
             {"r.spq", ptensor(json::array(), 0)},
             {"r.twice", ptensor(json::array(), 0)},
             {"r.two", ptensor(json::array(), 0)},
             {"r.a", ptensor(json::array(), 0)},
             {"r.b", ptensor(json::array(), 0)},
             {"r.y", ptensor(json::array(), 0, {{"tensor", "y"}})}};
  json pops = {op("pf", "cast", {"r.p"}, {"r.pf"}, {{"dtype", "f32"}}),
               op("qf", "cast", {"r.q"}, {"r.qf"}, {{"dtype", "f32"}}),
               op("pq", "mul", {"r.pf", "r.qf"}, {"r.pq"}),
               op("sp", "sum", {"r.pf"}, {"r.sp"}),
               op("sq", "sum", {"r.qf"}, {"r.sq"}),
               op("spq", "sum", {"r.pq"}, {"r.spq"}),
               op("twice", "scale", {"r.spq"}, {"r.twice"}, {{"factor", 2}}),
               op("two", "const", json::array(), {"r.two"},
                  {{"value", 2}, {"shape", json::array()}, {"dtype", "f32"}}),
               op("a", "sub", {"r.two", "r.sp"}, {"r.a"}),
               op("b", "sub", {"r.a", "r.sq"}, {"r.b"}),
               op("y", "add", {"r.b", "r.twice"}, {"r.y"})};
  json parallel = {{"world", 1},
                   {"tensors", pt},
                   {"inputs", {"r.p", "r.q"}},
                   {"ops", pops},
                   {"outputs", {"r.y"}}};
  Report r = verify_json(plan(logical, parallel), "indicator-count");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
}

// The same gap without comparisons: any per-element value that is constant
// as a function of its varying inputs (x / x, exp(x - x)) counts the piece
// when summed, and a parallel constant written for the reduced piece
// matches. Here sum(x / x) over 8 elements is written as the constant 2;
// x / x is a constant by section 3.2.
TEST(Soundness, CancellingValuesCountThePiece) {
  const int64_t T = 8;
  json logical = {
      {"tensors", {{"x", tensor({T})}, {"r", tensor({T})}, {"y", tensor(json::array())}}},
      {"inputs", {"x"}},
      {"ops", {op("r", "div", {"x", "x"}, {"r"}), op("y", "sum", {"r"}, {"y"}, {{"dims", {0}}})}},
      {"outputs", {"y"}}};
  json parallel = {{"world", 1},
                   {"tensors",
                    {{"p.x", ptensor({T}, 0, {{"tensor", "x"}})},
                     {"p.y", ptensor(json::array(), 0, {{"tensor", "y"}})}}},
                   {"inputs", {"p.x"}},
                   {"ops",
                    {op("p.y", "const", json::array(), {"p.y"},
                        {{"value", 2}, {"shape", json::array()}, {"dtype", "f32"}})}},
                   {"outputs", {"p.y"}}};
  Report r = verify_json(plan(logical, parallel), "cancelling-count");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
}

}  // namespace
}  // namespace shardproof

namespace shardproof {
namespace {

// A chain of 40 exps, copied on one rank (with a wrong final scale when
// `bug`). With polynomials for exp, exact random testing would need values
// of 2^40 bits; its random functions are a hash of the arguments, so the
// values stay small and testing finds the bug before any solver call.
json deep_exp_chain(bool bug) {
  const int depth = 40;
  json ltensors = {{"x", tensor({2})}}, lops = json::array();
  json ptensors = {{"r0.x", ptensor({2}, 0, {{"tensor", "x"}})}}, pops = json::array();
  for (int i = 1; i <= depth; ++i) {
    const std::string prev = "h" + std::to_string(i - 1), cur = "h" + std::to_string(i);
    const std::string lin = i == 1 ? "x" : prev, pin = i == 1 ? "r0.x" : "r0." + prev;
    ltensors[cur] = tensor({2});
    lops.push_back(op("l." + cur, "exp", {lin}, {cur}));
    ptensors["r0." + cur] = ptensor({2}, 0);
    pops.push_back(op("r0." + cur, "exp", {pin}, {"r0." + cur}));
  }
  const std::string last = "h" + std::to_string(depth);
  ptensors["r0.y"] = ptensor({2}, 0, {{"tensor", last}});
  pops.push_back(op("r0.y", "scale", {"r0." + last}, {"r0.y"}, {{"factor", bug ? 2 : 1}}));
  json logical = {{"tensors", ltensors}, {"inputs", {"x"}}, {"ops", lops}, {"outputs", {last}}};
  json parallel = {{"world", 1},
                   {"tensors", ptensors},
                   {"inputs", {"r0.x"}},
                   {"ops", pops},
                   {"outputs", {"r0.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, DeepTranscendentalChainsAreDecidedNotTestedForever) {
  Report ok = testing::verify_json(deep_exp_chain(false), "deep-exp");
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
  Report bug = testing::verify_json(deep_exp_chain(true), "deep-exp-bug");
  EXPECT_EQ(bug.verdict, Verdict::NotEquivalent) << testing::explain(bug);
  EXPECT_EQ(bug.stats.refuted_by_testing, 1) << testing::explain(bug);
}

}  // namespace
}  // namespace shardproof

namespace shardproof {
namespace {

// y = exp(x) replicated on three ranks: ranks 0 and 1 all-reduce halves of
// it (parts of y), rank 2 recomputes it from x. One claim group, two ways:
// the parts' stage takes y as given by its parts, the recomputed replica
// must be checked against y computed from x (it was checked against a free
// y, a false "not equivalent").
json mixed_replica_group(const std::string& rank2_op, double half) {
  json logical = {{"tensors", {{"x", tensor({4})}, {"y", tensor({4})}}},
                  {"inputs", {"x"}},
                  {"ops", {op("f", "exp", {"x"}, {"y"})}},
                  {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array();
  for (int r = 0; r < 3; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "x"] = ptensor({4}, r, {{"tensor", "x"}});
    tensors[p + "y"] = ptensor({4}, r, {{"tensor", "y"}});
  }
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    tensors[p + "e"] = ptensor({4}, r);
    tensors[p + "half"] = ptensor({4}, r, {{"tensor", "y"}, {"part", {r, 2}}});
    ops.push_back(op(p + "e", "exp", {p + "x"}, {p + "e"}));
    ops.push_back(op(p + "half", "scale", {p + "e"}, {p + "half"}, {{"factor", half}}));
  }
  ops.push_back({{"name", "ar"},
                 {"op", "all_reduce"},
                 {"in", {"r0.half", "r1.half"}},
                 {"out", {"r0.y", "r1.y"}},
                 {"attrs", {{"reduce", "sum"}}},
                 {"group", {0, 1}}});
  ops.push_back(op("r2.y", rank2_op, {"r2.x"}, {"r2.y"}));
  json parallel = {{"world", 3},
                   {"tensors", tensors},
                   {"inputs", {"r0.x", "r1.x", "r2.x"}},
                   {"ops", ops},
                   {"outputs", {"r0.y", "r1.y", "r2.y"}}};
  return plan(logical, parallel);
}

TEST(Soundness, AReplicaRecomputedBesideAllReducedPartsIsCheckedOnItsOwn) {
  Report ok = verify_json(mixed_replica_group("exp", 0.5), "mixed-replicas");
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << explain(ok);
  Report recomputed = verify_json(mixed_replica_group("log", 0.5), "mixed-recomputed-bug");
  ASSERT_EQ(recomputed.verdict, Verdict::NotEquivalent) << explain(recomputed);
  EXPECT_EQ(recomputed.findings.front().parallel_tensors, std::vector<std::string>{"r2.y"});
  Report parts = verify_json(mixed_replica_group("exp", 0.25), "mixed-parts-bug");
  ASSERT_EQ(parts.verdict, Verdict::NotEquivalent) << explain(parts);
  EXPECT_EQ(parts.findings.front().tensor, "y");
}

}  // namespace
}  // namespace shardproof
