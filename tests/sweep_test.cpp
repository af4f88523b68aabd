// Sweeping (engine/prove/sweep.h): a vocabulary-parallel softmax, whose row
// maximum is the maximum of the shards' maxima, is proven only once the
// equal maxima are proven and merged; a forgotten all-reduce of the sum is
// still found.
#include <gtest/gtest.h>

#include <string>

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

// y = softmax(x) over the vocabulary (dim 1) of `rows` rows, the vocabulary
// split over tp ranks as Megatron's cross entropy does: local max, all-reduce
// max, exp, local sum, all-reduce sum, divide. `sum_reduced` false: each
// rank divides by its own partial sum (a bug).
json softmax_plan(int rows, int vocab, int tp, bool sum_reduced = true) {
  const int local = vocab / tp;
  auto softmax_ops = [&](const std::string& p, bool reduce) {
    json ops = json::array();
    ops.push_back(
        {{"op", "max"}, {"in", {p + "x"}}, {"out", {p + "m"}}, {"attrs", {{"dims", {1}}}}});
    if (reduce) ops.push_back(nullptr);  // the all-reduce of m, filled in by the caller
    ops.push_back({{"op", "reshape"},
                   {"in", {p + (reduce ? "M" : "m")}},
                   {"out", {p + "mc"}},
                   {"attrs", {{"shape", {rows, 1}}}}});
    ops.push_back({{"op", "sub"}, {"in", {p + "x", p + "mc"}}, {"out", {p + "d"}}});
    ops.push_back({{"op", "exp"}, {"in", {p + "d"}}, {"out", {p + "e"}}});
    ops.push_back(
        {{"op", "sum"}, {"in", {p + "e"}}, {"out", {p + "s"}}, {"attrs", {{"dims", {1}}}}});
    return ops;
  };
  json lt = {{"x", tensor({rows, vocab})}, {"m", tensor({rows})},        {"mc", tensor({rows, 1})},
             {"d", tensor({rows, vocab})}, {"e", tensor({rows, vocab})}, {"s", tensor({rows})},
             {"sc", tensor({rows, 1})},    {"y", tensor({rows, vocab})}};
  json lops = softmax_ops("", false);
  lops.push_back(
      {{"op", "reshape"}, {"in", {"s"}}, {"out", {"sc"}}, {"attrs", {{"shape", {rows, 1}}}}});
  lops.push_back({{"op", "div"}, {"in", {"e", "sc"}}, {"out", {"y"}}});
  json logical = {{"tensors", lt}, {"inputs", {"x"}}, {"ops", lops}, {"outputs", {"y"}}};

  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array(), group = json::array();
  json max_in = json::array(), max_out = json::array(), sum_in = json::array(),
       sum_out = json::array();
  for (int r = 0; r < tp; ++r) group.push_back(r);
  for (int r = 0; r < tp; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const json cols = {{0, rows}, {r * local, (r + 1) * local}};
    tensors[p + "x"] = tensor({rows, local}, r, {{"tensor", "x"}, {"slice", cols}});
    tensors[p + "y"] = tensor({rows, local}, r, {{"tensor", "y"}, {"slice", cols}});
    for (const char* t : {"m", "M", "s", "S"}) tensors[p + t] = tensor({rows}, r);
    for (const char* t : {"mc", "Sc"}) tensors[p + t] = tensor({rows, 1}, r);
    for (const char* t : {"d", "e"}) tensors[p + t] = tensor({rows, local}, r);
    inputs.push_back(p + "x");
    outputs.push_back(p + "y");
    max_in.push_back(p + "m");
    max_out.push_back(p + "M");
    sum_in.push_back(p + "s");
    sum_out.push_back(p + "S");
    for (json op : softmax_ops(p, true)) {
      if (op.is_null()) continue;
      op["rank"] = r;
      ops.push_back(op);
    }
    const std::string sum = sum_reduced ? "S" : "s";
    ops.push_back({{"op", "reshape"},
                   {"in", {p + sum}},
                   {"out", {p + "Sc"}},
                   {"attrs", {{"shape", {rows, 1}}}},
                   {"rank", r}});
    ops.push_back({{"op", "div"}, {"in", {p + "e", p + "Sc"}}, {"out", {p + "y"}}, {"rank", r}});
  }
  ops.push_back({{"op", "all_reduce"},
                 {"in", max_in},
                 {"out", max_out},
                 {"attrs", {{"reduce", "max"}}},
                 {"group", group}});
  if (sum_reduced)
    ops.push_back({{"op", "all_reduce"}, {"in", sum_in}, {"out", sum_out}, {"group", group}});
  else
    for (int r = 0; r < tp; ++r) tensors.erase("r" + std::to_string(r) + ".S");
  json parallel = {
      {"world", tp}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "vocab-parallel-softmax"},
          {"logical", logical},
          {"parallel", parallel}};
}

TEST(Sweep, AVocabularyParallelSoftmaxIsProven) {
  const Report r = testing::verify_json(softmax_plan(4, 16, 2), "sweep-softmax");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(Sweep, AForgottenAllReduceOfTheSumIsFound) {
  const Report r = testing::verify_json(softmax_plan(4, 16, 2, false), "sweep-softmax-bug");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings.at(0).tensor, "y") << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
