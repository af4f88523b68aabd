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

inline void expect_twins(const json& good, const json& bad, const std::string& stem) {
  Report g = testing::verify_json(good, stem + "-good");
  EXPECT_EQ(g.verdict, Verdict::Equivalent) << testing::explain(g);
  Report b = testing::verify_json(bad, stem + "-bad");
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
}

}  // namespace shardproof::family_plans
