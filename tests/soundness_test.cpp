// Each test is a plan that would be reported *equivalent* if the rule named
// in docs/soundness.md ("Rules, and the trap each one closes") were missing,
// next to its correct twin that must stay equivalent.
#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace shardproof
