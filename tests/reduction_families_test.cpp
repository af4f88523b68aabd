// Plans written against the shape-reduction argument (docs/soundness.md,
// "Values that count the piece", and issue 20's families): each bug was
// reported *equivalent* before the rule that closes it, and each correct
// twin was refuted by a difference that exists only at reduced size.
#include <gtest/gtest.h>

#include "tests/family_plans.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::explain;
using testing::verify_json;
using namespace family_plans;

// ---------------------------------------------------------------- family 1
// The label-smoothing term: sum over the vocabulary of log_softmax, which
// subtracts the row's log-sum-exp at every position: sum(x) - V * lse. The
// parallel side writes it from sum(x) and lse (read off column 0) scaled by
// `count`: right for 8, and for 2 only at the reduced size.
json log_softmax_sum(int count) {
  const int64_t R = 2, V = 8;
  json lt = {{"x", tensor({R, V})}, {"lsm", tensor({R, V})}, {"y", tensor({R})}};
  json lops = {op("lsm", "log_softmax", {"x"}, {"lsm"}, {{"dim", 1}}),
               op("y", "sum", {"lsm"}, {"y"}, {{"dims", {1}}})};
  json pt = {{"p.lsm", ptensor({R, V})}, {"p.x0", ptensor({R, 1})},
             {"p.l0", ptensor({R, 1})},  {"p.lse", ptensor({R, 1})},
             {"p.lse1", ptensor({R})},   {"p.n", ptensor({R})},
             {"p.sx", ptensor({R})},     {"p.y", ptensor({R}, {{"tensor", "y"}})}};
  json pops = {op("p.lsm", "log_softmax", {"p.x"}, {"p.lsm"}, {{"dim", 1}}),
               op("p.x0", "slice", {"p.x"}, {"p.x0"}, {{"dim", 1}, {"start", 0}, {"end", 1}}),
               op("p.l0", "slice", {"p.lsm"}, {"p.l0"}, {{"dim", 1}, {"start", 0}, {"end", 1}}),
               op("p.lse", "sub", {"p.x0", "p.l0"}, {"p.lse"}),
               op("p.lse1", "reshape", {"p.lse"}, {"p.lse1"}, {{"shape", {R}}}),
               op("p.n", "scale", {"p.lse1"}, {"p.n"}, {{"factor", count}}),
               op("p.sx", "sum", {"p.x"}, {"p.sx"}, {{"dims", {1}}}),
               op("p.y", "sub", {"p.sx", "p.n"}, {"p.y"})};
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

TEST(ReductionFamilies, LogSoftmaxSubtractsItsRowAtEveryPosition) {
  expect_twins(log_softmax_sum(8), log_softmax_sum(2), "log-softmax-sum");
}

// layernorm centres its row: sum((layernorm(x, w, b) - b) / w) = 0 over the
// full row, but not over a reduced one (the mean divides by the full count).
TEST(ReductionFamilies, LayernormCentresTheFullRow) {
  const int64_t R = 1, H = 4;
  json lt = {{"x", tensor({R, H})}, {"w", tensor({H})},    {"b", tensor({H})},
             {"n", tensor({R, H})}, {"c", tensor({R, H})}, {"q", tensor({R, H})},
             {"y", tensor({R})}};
  json lops = {op("n", "layernorm", {"x", "w", "b"}, {"n"}, {{"eps", "1/100"}}),
               op("c", "sub", {"n", "b"}, {"c"}), op("q", "div", {"c", "w"}, {"q"}),
               op("y", "sum", {"q"}, {"y"}, {{"dims", {1}}})};
  json good_ops = {constant("p.y", 0, {R})};
  json pt = {{"p.y", ptensor({R}, {{"tensor", "y"}})}};
  Report g =
      verify_json(one_rank(lt, {"x", "w", "b"}, lops, {"y"}, pt, json::object(), good_ops, {"p.y"}),
                  "layernorm-centred");
  EXPECT_EQ(g.verdict, Verdict::Equivalent) << explain(g);
}

// ---------------------------------------------------------------- family 2
// A value constant along every axis though no `const` says so, summed over
// 8 elements; the parallel side writes the count as `count`.
json constant_count(const std::string& form, int count) {
  const int64_t T = 8;
  json lt = {{"x", tensor({T})}, {"k", tensor({T})}, {"y", tensor(json::array())}};
  json lops = json::array(), linputs = json::array({"x"});
  if (form == "pow") {
    lops.push_back(op("k", "pow", {"x"}, {"k"}, {{"exponent", 0}}));
  } else if (form == "scale") {
    lt["z"] = tensor({T});
    lops.push_back(op("z", "scale", {"x"}, {"z"}, {{"factor", 0}}));
    lops.push_back(op("k", "exp", {"z"}, {"k"}));
  } else if (form == "sub") {
    lt["z"] = tensor({T});
    lops.push_back(op("z", "sub", {"x", "x"}, {"z"}));
    lops.push_back(op("k", "exp", {"z"}, {"k"}));
  } else if (form == "eq-iota") {
    lt.erase("x");
    linputs = json::array();
    lt["i"] = tensor({T}, "i64");
    lt["e"] = tensor({T}, "bool");
    lops.push_back(op("i", "iota", json::array(), {"i"}, {{"shape", {T}}, {"dim", 0}}));
    lops.push_back(op("e", "eq", {"i", "i"}, {"e"}));
    lops.push_back(op("k", "cast", {"e"}, {"k"}, {{"dtype", "f32"}}));
  }
  lops.push_back(op("y", "sum", {"k"}, {"y"}));
  // The parallel side: the per-element constant from a scalar, times count.
  json pt = {
      {"p.z", ptensor(json::array())}, {"p.k", ptensor(json::array())}, {"p.y", scalar_claim("y")}};
  json pops = {constant("p.z", 0, json::array())};
  if (form == "pow" || form == "eq-iota") {
    pt.erase("p.z");
    pops = {constant("p.k", 1, json::array()),
            op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", count}})};
  } else {
    pops.push_back(op("p.k", "exp", {"p.z"}, {"p.k"}));
    pops.push_back(op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", count}}));
  }
  json claims = linputs.empty() ? json::object() : json{{"p.x", "x"}};
  return one_rank(lt, linputs, lops, {"y"}, pt, claims, pops, {"p.y"});
}

TEST(ReductionFamilies, PowZeroIsAConstant) {
  expect_twins(constant_count("pow", 8), constant_count("pow", 2), "pow0");
}
TEST(ReductionFamilies, ScaleByZeroIsAConstant) {
  expect_twins(constant_count("scale", 8), constant_count("scale", 2), "scale0");
}
TEST(ReductionFamilies, AnOperandMinusItselfIsAConstant) {
  expect_twins(constant_count("sub", 8), constant_count("sub", 2), "sub-self");
}
TEST(ReductionFamilies, IotaEqualToItselfIsAConstant) {
  expect_twins(constant_count("eq-iota", 8), constant_count("eq-iota", 2), "eq-iota");
}

// ---------------------------------------------------------------- family 4
// A count of set flags clipped at a capacity of 3: on pieces of 2 the count
// never reaches it, so a parallel side that forgets the clip matched.
json clipped_count(bool clip) {
  const int64_t T = 8;
  json lt = {{"p", tensor({T}, "bool")},
             {"f", tensor({T})},
             {"c", tensor(json::array())},
             {"cap", tensor(json::array())},
             {"y", tensor(json::array())}};
  json lops = {op("f", "cast", {"p"}, {"f"}, {{"dtype", "f32"}}), op("c", "sum", {"f"}, {"c"}),
               constant("cap", 3, json::array()), op("y", "minimum", {"c", "cap"}, {"y"})};
  json pt = {{"r.f", ptensor({T})},
             {"r.c", ptensor(json::array())},
             {"r.cap", ptensor(json::array())},
             {"r.y", scalar_claim("y")}};
  json pops = {op("r.f", "cast", {"r.p"}, {"r.f"}, {{"dtype", "f32"}})};
  if (clip) {
    pops.push_back(op("r.c", "sum", {"r.f"}, {"r.c"}));
    pops.push_back(constant("r.cap", 3, json::array()));
    pops.push_back(op("r.y", "minimum", {"r.c", "r.cap"}, {"r.y"}));
  } else {
    pt.erase("r.c");
    pt.erase("r.cap");
    pops.push_back(op("r.y", "sum", {"r.f"}, {"r.y"}));
  }
  return one_rank(lt, {"p"}, lops, {"y"}, pt, {{"r.p", "p"}}, pops, {"r.y"});
}

TEST(ReductionFamilies, ACountClippedAtACapacityKeepsItsTokens) {
  expect_twins(clipped_count(true), clipped_count(false), "capacity");
}

// Tokens routed to 4 experts by a one-hot of their ids; each expert keeps at
// most 2 of them. The bug drops the clip on the last expert.
json expert_load(bool clip_all) {
  const int64_t T = 8, E = 4;
  json lt = {{"ids", tensor({T, 1}, "i64")},
             {"iota", tensor({1, E}, "i64")},
             {"hot", tensor({T, E}, "bool")},
             {"f", tensor({T, E})},
             {"load", tensor({E})},
             {"cap", tensor(json::array())},
             {"y", tensor({E})}};
  json lops = {op("iota", "iota", json::array(), {"iota"}, {{"shape", {1, E}}, {"dim", 1}}),
               op("hot", "eq", {"ids", "iota"}, {"hot"}),
               op("f", "cast", {"hot"}, {"f"}, {{"dtype", "f32"}}),
               op("load", "sum", {"f"}, {"load"}, {{"dims", {0}}}),
               constant("cap", 2, json::array()),
               op("y", "minimum", {"load", "cap"}, {"y"})};
  json pt = {{"r.iota", ptensor({1, E}, nullptr, "i64")},
             {"r.hot", ptensor({T, E}, nullptr, "bool")},
             {"r.f", ptensor({T, E})},
             {"r.load", ptensor({E})},
             {"r.cap", ptensor(json::array())},
             {"r.lo", ptensor({E - 1})},
             {"r.hi", ptensor({1})},
             {"r.cl", ptensor({E - 1})},
             {"r.y", ptensor({E}, {{"tensor", "y"}})}};
  json pops = {
      op("r.iota", "iota", json::array(), {"r.iota"}, {{"shape", {1, E}}, {"dim", 1}}),
      op("r.hot", "eq", {"r.ids", "r.iota"}, {"r.hot"}),
      op("r.f", "cast", {"r.hot"}, {"r.f"}, {{"dtype", "f32"}}),
      op("r.load", "sum", {"r.f"}, {"r.load"}, {{"dims", {0}}}),
      constant("r.cap", 2, json::array()),
      op("r.lo", "slice", {"r.load"}, {"r.lo"}, {{"dim", 0}, {"start", 0}, {"end", E - 1}}),
      op("r.hi", "slice", {"r.load"}, {"r.hi"}, {{"dim", 0}, {"start", E - 1}, {"end", E}}),
      op("r.cl", "minimum", {"r.lo", "r.cap"}, {"r.cl"})};
  if (clip_all) {
    pt["r.ch"] = ptensor({1});
    pops.push_back(op("r.ch", "minimum", {"r.hi", "r.cap"}, {"r.ch"}));
    pops.push_back(op("r.y", "concat", {"r.cl", "r.ch"}, {"r.y"}, {{"dim", 0}}));
  } else {
    pops.push_back(op("r.y", "concat", {"r.cl", "r.hi"}, {"r.y"}, {{"dim", 0}}));
  }
  return one_rank(lt, {"ids"}, lops, {"y"}, pt, {{"r.ids", "ids"}}, pops, {"r.y"});
}

TEST(ReductionFamilies, AnExpertsTokenCountKeepsItsTokens) {
  expect_twins(expert_load(true), expert_load(false), "expert-load");
}

// A count of counts: flags summed over 4 tokens per expert, the 8 counts
// summed, the total clipped at 30. The tokens kept full size (a sum of
// flags), but the experts reduced to 2, where the total never exceeds 8: a
// rank that forgets the clip was proven (random flags almost never reach
// 30 either, so the full-size backstop missed it too).
json count_of_counts(bool clip) {
  const int64_t T = 4, E = 8;
  auto chain = [&](const std::string& p, bool clipped, json& tensors) {
    const std::string total = clipped ? p + "total" : p + "y";
    json ops = {op(p + "f", "cast", {p + "p"}, {p + "f"}, {{"dtype", "f32"}}),
                op(p + "c", "sum", {p + "f"}, {p + "c"}, {{"dims", {0}}}),
                op(total, "sum", {p + "c"}, {total})};
    tensors[p + "f"] = ptensor({T, E});
    tensors[p + "c"] = ptensor({E});
    if (clipped) {
      tensors[total] = ptensor(json::array());
      tensors[p + "cap"] = ptensor(json::array());
      ops.push_back(constant(p + "cap", 30, json::array()));
      ops.push_back(op(p + "y", "minimum", {total, p + "cap"}, {p + "y"}));
    }
    return ops;
  };
  json lt = {{"p", tensor({T, E}, "bool")}, {"y", tensor(json::array())}};
  json lops = chain("", true, lt);
  for (auto& [name, t] : lt.items()) t.erase("rank");
  json pt = {{"r.y", scalar_claim("y")}};
  json pops = chain("r.", clip, pt);
  return one_rank(lt, {"p"}, lops, {"y"}, pt, {{"r.p", "p"}}, pops, {"r.y"});
}

TEST(ReductionFamilies, ACountOfCountsKeepsBothLines) {
  expect_twins(count_of_counts(true), count_of_counts(false), "count-of-counts");
}

// ---------------------------------------------------------------- family 3
// Values constant in varying inputs (docs/soundness.md, section 7): eq(p, q)
// on booleans is 1 - p - q + 2pq, and x / x is 1; summed over 8 elements
// each counts the piece (4 here, so the full-size proof stays small).
json indicator_count(int count) {
  const int64_t T = 4;
  json lt = {{"p", tensor({T}, "bool")},
             {"q", tensor({T}, "bool")},
             {"e", tensor({T}, "bool")},
             {"f", tensor({T})},
             {"y", tensor(json::array())}};
  json lops = {op("e", "eq", {"p", "q"}, {"e"}), op("f", "cast", {"e"}, {"f"}, {{"dtype", "f32"}}),
               op("y", "sum", {"f"}, {"y"})};
  // count - sum(p) - sum(q) + 2 sum(pq)
  json pt = {{"r.pf", ptensor({T})},
             {"r.qf", ptensor({T})},
             {"r.pq", ptensor({T})},
             {"r.s", ptensor({T})},
             {"r.t", ptensor({T})},
             {"r.u", ptensor({T})},
             {"r.su", ptensor(json::array())},
             {"r.n", ptensor(json::array())},
             {"r.y", scalar_claim("y")}};
  json pops = {op("r.pf", "cast", {"r.p"}, {"r.pf"}, {{"dtype", "f32"}}),
               op("r.qf", "cast", {"r.q"}, {"r.qf"}, {{"dtype", "f32"}}),
               op("r.pq", "mul", {"r.pf", "r.qf"}, {"r.pq"}),
               op("r.s", "scale", {"r.pq"}, {"r.s"}, {{"factor", 2}}),
               op("r.t", "sub", {"r.s", "r.pf"}, {"r.t"}),
               op("r.u", "sub", {"r.t", "r.qf"}, {"r.u"}),
               op("r.su", "sum", {"r.u"}, {"r.su"}),
               constant("r.n", count, json::array()),
               op("r.y", "add", {"r.su", "r.n"}, {"r.y"})};
  return one_rank(lt, {"p", "q"}, lops, {"y"}, pt, {{"r.p", "p"}, {"r.q", "q"}}, pops, {"r.y"});
}

TEST(ReductionFamilies, ComparisonIndicatorsCountThePiece) {
  expect_twins(indicator_count(4), indicator_count(2), "indicator");
}

TEST(ReductionFamilies, AQuotientOfItselfCountsThePiece) {
  const int64_t T = 8;
  json lt = {{"x", tensor({T})}, {"r", tensor({T})}, {"y", tensor(json::array())}};
  json lops = {op("r", "div", {"x", "x"}, {"r"}), op("y", "sum", {"r"}, {"y"})};
  auto with = [&](int count) {
    json pt = {{"p.y", scalar_claim("y")}};
    return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}},
                    {constant("p.y", count, json::array())}, {"p.y"});
  };
  expect_twins(with(8), with(2), "quotient");
}

// Values constant through a product that cancels (x * (1 / x)) or a zero
// factor under a function (exp(x * (x - x))), summed over rows of 8: a
// row's piece is counted. The stage has 4096 rows, too many for the
// full-size witness and backstop (section 5.1), so only the rule decides:
// before it, the correct count 8 was refuted by a difference at pieces of 2
// that no full-size replay withdrew, and a bug that compares the count with
// 5 (true at 8, false at 2 and at the backstop's 3) was proven.
json cancelled_count(const std::string& form, bool compare, int count) {
  const int64_t R = 4096, V = 8;
  json lt = {{"x", tensor({R, V})}, {"m", tensor({R, V})}, {"y", tensor({R})}};
  json lops = json::array();
  if (form == "reciprocal") {
    lt["r"] = tensor({R, V});
    lops = {op("r", "reciprocal", {"x"}, {"r"}), op("m", "mul", {"x", "r"}, {"m"})};
  } else {  // exp of a zero product
    lt["z"] = tensor({R, V});
    lt["xz"] = tensor({R, V});
    lops = {op("z", "sub", {"x", "x"}, {"z"}), op("xz", "mul", {"x", "z"}, {"xz"}),
            op("m", "exp", {"xz"}, {"m"})};
  }
  lops.push_back(op("y", "sum", {"m"}, {"y"}, {{"dims", {1}}}));
  json pt = json::object(), pops = json::array();
  std::string out = "y";
  if (compare) {  // the bug: the count's comparison with 5 written as false
    lt["five"] = tensor(json::array());
    lt["g"] = tensor({R}, "bool");
    lops.push_back(constant("five", 5, json::array()));
    lops.push_back(op("g", "ge", {"y", "five"}, {"g"}));
    out = "g";
    pt["p.g"] = ptensor({R}, {{"tensor", "g"}}, "bool");
    pops.push_back(constant("p.g", 0, {R}, "bool"));
  } else {  // the per-element constant, times count
    pt = {{"p.c", ptensor({R})}, {"p.e", ptensor({R})}, {"p.y", ptensor({R}, {{"tensor", "y"}})}};
    const bool exp = form != "reciprocal";
    pops = {constant("p.c", exp ? 0 : 1, {R}), op("p.e", exp ? "exp" : "neg", {"p.c"}, {"p.e"}),
            op("p.y", "scale", {"p.e"}, {"p.y"}, {{"factor", exp ? count : -count}})};
  }
  return one_rank(lt, {"x"}, lops, {out}, pt, {{"p.x", "x"}}, pops, {"p." + out});
}

TEST(ReductionFamilies, AProductWithItsReciprocalCountsThePiece) {
  expect_twins(cancelled_count("reciprocal", false, 8), cancelled_count("reciprocal", true, 0),
               "reciprocal-product");
  Report b = verify_json(cancelled_count("reciprocal", false, 2), "reciprocal-product-2");
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << explain(b);
}

TEST(ReductionFamilies, AFunctionOfAZeroProductCountsThePiece) {
  expect_twins(cancelled_count("zero", false, 8), cancelled_count("zero", false, 2),
               "zero-product");
}

// ---------------------------------------------------------------- family 5
// A vocabulary-parallel lookup over 2 ranks: rank 1 shifts and masks its
// ids, rank 0 (whose shard starts at 0) must still mask ids past its shard.
// Without the mask its lookup indexes past its shard: that must be proven
// in range, not assumed because the ids are a logical input.
json shard_lookup(bool mask_rank0) {
  const int64_t T = 4, V = 8, H = 2, S = V / 2;
  json logical = {
      {"tensors", {{"ids", tensor({T}, "i64")}, {"emb", tensor({V, H})}, {"out", tensor({T, H})}}},
      {"inputs", {"ids", "emb"}},
      {"ops", {op("out", "embedding", {"ids", "emb"}, {"out"})}},
      {"outputs", {"out"}}};
  json pt = json::object(), pops = json::array(), pin = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    auto t = [&](json shape, const std::string& dtype = "f32") {
      return ptensor(shape, nullptr, dtype, r);
    };
    pt[p + "ids"] = ptensor({T}, {{"tensor", "ids"}}, "i64", r);
    pt[p + "emb"] =
        ptensor({S, H}, {{"tensor", "emb"}, {"slice", {{S * r, S * r + S}, {0, H}}}}, "f32", r);
    pt[p + "part"] = t({T, H});
    pt[p + "out"] = ptensor({T, H}, {{"tensor", "out"}}, "f32", r);
    pin.push_back(p + "ids");
    pin.push_back(p + "emb");
    std::string looked = p + "part";
    if (r == 1 || mask_rank0) {
      for (const char* n : {"lo", "hi", "zero", "local", "safe"})
        pt[p + n] = t(
            std::string(n) == "local" || std::string(n) == "safe" ? json{T} : json::array(), "i64");
      for (const char* n : {"ge", "lt", "own"}) pt[p + n] = t({T}, "bool");
      pt[p + "ownf"] = t({T, 1});
      pt[p + "ownv"] = t({T});
      pt[p + "rows"] = t({T, H});
      json c = {constant(p + "lo", S * r, json::array(), "i64"),
                constant(p + "hi", S * r + S, json::array(), "i64"),
                constant(p + "zero", 0, json::array(), "i64"),
                op(p + "ge", "ge", {p + "ids", p + "lo"}, {p + "ge"}),
                op(p + "lt", "lt", {p + "ids", p + "hi"}, {p + "lt"}),
                op(p + "own", "where", {p + "ge", p + "lt", p + "ge"}, {p + "own"}),
                op(p + "local", "sub", {p + "ids", p + "lo"}, {p + "local"}),
                op(p + "safe", "where", {p + "own", p + "local", p + "zero"}, {p + "safe"}),
                op(p + "rows", "embedding", {p + "safe", p + "emb"}, {p + "rows"}),
                op(p + "ownv", "cast", {p + "own"}, {p + "ownv"}, {{"dtype", "f32"}}),
                op(p + "ownf", "reshape", {p + "ownv"}, {p + "ownf"}, {{"shape", {T, 1}}}),
                op(p + "part", "mul", {p + "rows", p + "ownf"}, {p + "part"})};
      for (json& o : c) pops.push_back(o);
      for (auto& [k, v] : pt.items())
        if (k.rfind(p, 0) == 0) v["rank"] = r;
    } else {
      pops.push_back(op(p + "part", "embedding", {p + "ids", p + "emb"}, {p + "part"}));
    }
  }
  pops.push_back({{"name", "ar"},
                  {"op", "all_reduce"},
                  {"in", {"r0.part", "r1.part"}},
                  {"out", {"r0.out", "r1.out"}},
                  {"attrs", {{"reduce", "sum"}}},
                  {"group", {0, 1}}});
  json parallel = {{"world", 2},
                   {"tensors", pt},
                   {"inputs", pin},
                   {"ops", pops},
                   {"outputs", {"r0.out", "r1.out"}}};
  return {{"format", "shardproof-plan/1"},
          {"name", "shard-lookup"},
          {"logical", logical},
          {"parallel", parallel}};
}

TEST(ReductionFamilies, AnIndexIntoAParallelShardIsProvenInRange) {
  expect_twins(shard_lookup(true), shard_lookup(false), "shard-lookup");
}

// ------------------------------------------------ where with a constant branch
// where(c, k, x) = c k + (1 - c) x: for k != 0 the term c k is repeated
// wherever c holds, so a sum along the line counts it (here c = iota < 8 is
// true everywhere: the sum is 8 k). Likewise a zero branch beside a
// constant: where(false, 0, 1) summed counts the ones.
json where_count(int64_t fill, bool x_constant, int count) {
  const int64_t T = 8;
  json lt = {
      {"x", tensor({T})},         {"i", tensor({T}, "i64")},    {"n", tensor(json::array(), "i64")},
      {"c", tensor({T}, "bool")}, {"k", tensor(json::array())}, {"b", tensor({T})},
      {"w", tensor({T})},         {"y", tensor(json::array())}};
  json lops = {op("i", "iota", json::array(), {"i"}, {{"shape", {T}}, {"dim", 0}}),
               constant("n", T, json::array(), "i64"), op("c", "lt", {"i", "n"}, {"c"}),
               constant("k", fill, json::array())};
  // c is true everywhere: the fill is picked; with x_constant, x's branch
  // is the constant 1 and c is false everywhere instead.
  if (x_constant) {
    lops[1] = constant("n", 0, json::array(), "i64");
    lops.push_back(constant("b", 1, {T}));
  } else {
    lops.push_back(op("b", "scale", {"x"}, {"b"}, {{"factor", 1}}));
  }
  lops.push_back(op("w", "where", {"c", "k", "b"}, {"w"}));
  lops.push_back(op("y", "sum", {"w"}, {"y"}));
  json pt = {{"p.k", ptensor(json::array())}, {"p.y", scalar_claim("y")}};
  json pops = {constant("p.k", x_constant ? 1 : fill, json::array()),
               op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", count}})};
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

TEST(ReductionFamilies, AWhereWithANonzeroConstantBranchCountsThePiece) {
  expect_twins(where_count(3, false, 8), where_count(3, false, 2), "where-fill");
}
TEST(ReductionFamilies, AWhereOfZeroAndAConstantCountsThePiece) {
  expect_twins(where_count(0, true, 8), where_count(0, true, 2), "where-zero-const");
}

}  // namespace
}  // namespace shardproof
