// Small plans for the shape-reduction families (docs/soundness.md, section
// 3.2): JSON builders for tensors, ops and one-rank plans, and the check
// that a correct plan is equivalent while its buggy twin is not.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tests/position_plans.h"
#include "tests/test_support.h"

namespace shardproof::family_plans {

using nlohmann::json;

using testing::positions::op;
using testing::positions::tensor;

inline json ptensor(json shape, json of = nullptr, const std::string& dtype = "f32", int rank = 0) {
  json t = {{"shape", shape}, {"dtype", dtype}, {"rank", rank}};
  if (!of.is_null()) t["of"] = of;
  return t;
}
inline json constant(const std::string& out, json value, json shape,
                     const std::string& dtype = "f32") {
  return op(out, "const", json::array(), {out},
            {{"value", value}, {"shape", shape}, {"dtype", dtype}});
}
inline json scalar_claim(const std::string& of) {
  return ptensor(json::array(), {{"tensor", of}});
}

// A one-rank plan: the logical graph as given, and a parallel graph whose
// inputs claim the logical inputs whole (`claims`: parallel name -> logical).
inline json one_rank(json ltensors, json linputs, json lops, json loutputs, json ptensors,
                     json claims, json pops, json poutputs) {
  json pinputs = json::array();
  for (auto& [p, l] : claims.items()) {
    json shape = ltensors.at(l.get<std::string>()).at("shape");
    std::string dtype = ltensors.at(l.get<std::string>()).at("dtype");
    ptensors[p] = ptensor(shape, {{"tensor", l}}, dtype);
    pinputs.push_back(p);
  }
  return {{"format", "shardproof-plan/1"},
          {"name", "family"},
          {"logical",
           {{"tensors", ltensors}, {"inputs", linputs}, {"ops", lops}, {"outputs", loutputs}}},
          {"parallel",
           {{"world", 1},
            {"tensors", ptensors},
            {"inputs", pinputs},
            {"ops", pops},
            {"outputs", poutputs}}}};
}

// x[6 * width] split over 6 ranks; each rank scales its piece by `factor`
// where the logical graph scales by 3. At any width >= 2 every stage
// reduces to the same stage: only the full sizes, which no op reads, differ.
inline json scaled_sixths(int64_t width, int factor) {
  json logical = {{"tensors", {{"x", tensor({6 * width})}, {"y", tensor({6 * width})}}},
                  {"inputs", {"x"}},
                  {"ops", {op("s", "scale", {"x"}, {"y"}, {{"factor", 3}})}},
                  {"outputs", {"y"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  for (int r = 0; r < 6; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const json slice = {{width * r, width * (r + 1)}};
    tensors[p + "x"] = ptensor({width}, {{"tensor", "x"}, {"slice", slice}}, "f32", r);
    tensors[p + "y"] = ptensor({width}, {{"tensor", "y"}, {"slice", slice}}, "f32", r);
    ops.push_back(op(p + "s", "scale", {p + "x"}, {p + "y"}, {{"factor", factor}}));
    inputs.push_back(p + "x");
    outputs.push_back(p + "y");
  }
  return {{"format", "shardproof-plan/1"},
          {"name", "sixths"},
          {"logical", logical},
          {"parallel",
           {{"world", 6},
            {"tensors", tensors},
            {"inputs", inputs},
            {"ops", ops},
            {"outputs", outputs}}}};
}

// sum over `n` elements of exp(x - neg(neg(x))), written by the parallel
// side as exp(0) times `count`: the blind spot of docs/soundness.md, section
// 7 (the sum counts the piece, the rules see a varying value). At n = 2 the
// stage keeps its size, so count 2 is right and proven; at n = 8 it reduces
// to that same query, and only the full-size backstop knows 2 is wrong.
inline json recomputed_cancel(int64_t n, int count) {
  json lt = {{"x", tensor({n})}, {"n", tensor({n})}, {"nn", tensor({n})},
             {"d", tensor({n})}, {"e", tensor({n})}, {"y", tensor(json::array())}};
  json lops = {op("n", "neg", {"x"}, {"n"}), op("nn", "neg", {"n"}, {"nn"}),
               op("d", "sub", {"x", "nn"}, {"d"}), op("e", "exp", {"d"}, {"e"}),
               op("y", "sum", {"e"}, {"y"})};
  json pt = {
      {"p.z", ptensor(json::array())}, {"p.k", ptensor(json::array())}, {"p.y", scalar_claim("y")}};
  json pops = {constant("p.z", 0, json::array()), op("p.k", "exp", {"p.z"}, {"p.k"}),
               op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", count}})};
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

inline void expect_twins(const json& good, const json& bad, const std::string& stem) {
  Report g = testing::verify_json(good, stem + "-good");
  EXPECT_EQ(g.verdict, Verdict::Equivalent) << testing::explain(g);
  Report b = testing::verify_json(bad, stem + "-bad");
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
}

}  // namespace shardproof::family_plans
