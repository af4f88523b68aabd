// A parsed graph as text keyed by name, independent of order, for tests that
// compare two plans (a compact plan's expansion and the v1 plan): tensors
// with rank, dtype, shape and claim; ops with their operator, the names of
// their ins and outs, group, rank and attributes; the sorted inputs and
// outputs; the world.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "engine/format/v1/plan_validation.h"
#include "engine/report/report.h"

namespace shardproof::testing {

inline std::map<std::string, std::string> graph_by_name(const Graph& g) {
  std::map<std::string, std::string> out;
  auto names = [&](const std::vector<int>& ts) {
    std::string s;
    for (int t : ts) s += g.tensors[t].name + ",";
    return s;
  };
  for (const TensorDecl& t : g.tensors) {
    std::string v = "rank " + std::to_string(t.rank) + " dtype " +
                    std::to_string(static_cast<int>(t.dtype)) + " " + shape_to_string(t.shape);
    if (t.of) v += " of " + plan_detail::claim_text(*t.of);
    out["tensor " + t.name] = v;
  }
  for (const Op& op : g.ops) {
    std::string v = op.op + " in " + names(op.in) + " out " + names(op.out) + " rank " +
                    std::to_string(op.rank) + " group";
    for (int r : op.group) v += " " + std::to_string(r);
    v += " attrs";
    for (const auto& [key, attr] : op.attrs) v += " " + key + "=" + attr.describe();
    out["op " + op.name] = v;
  }
  for (auto [key, list] : {std::pair{"inputs", &g.inputs}, {"outputs", &g.outputs}}) {
    std::vector<std::string> sorted;
    for (int t : *list) sorted.push_back(g.tensors[t].name);
    std::sort(sorted.begin(), sorted.end());
    out[key] = std::to_string(sorted.size());
    for (const std::string& s : sorted) out[key] += " " + s;
  }
  out["world"] = std::to_string(g.world);
  return out;
}

// The first difference between two graphs' texts ("" if none).
inline std::string first_difference(const std::map<std::string, std::string>& a,
                                    const std::map<std::string, std::string>& b) {
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it == b.end()) return "only the first has " + k + ": " + v;
    if (it->second != v) return k + ": " + v + " / " + it->second;
  }
  for (const auto& [k, v] : b)
    if (!a.count(k)) return "only the second has " + k + ": " + v;
  return "";
}

// A plan the test expects to be valid, parsed (an empty plan if not).
inline Plan parse(const nlohmann::json& plan) {
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "");
  EXPECT_FALSE(r.error) << r.error->to_string();
  EXPECT_TRUE(r.io_error.empty()) << r.io_error;
  return r.plan ? std::move(*r.plan) : Plan{};
}

// The first finding without its stage number (which follows op order, and
// the two forms order ops differently).
inline std::string first_finding(const Report& r) {
  if (r.findings.empty()) return "(none)";
  const Finding& f = r.findings.front();
  // "stage 18: l1.pre[0:4, 0:8]": the number is the stage's position.
  std::string region = f.stage.substr(f.stage.find(": ") + 2);
  return f.kind + " | " + region + " | " + f.tensor;
}

}  // namespace shardproof::testing
