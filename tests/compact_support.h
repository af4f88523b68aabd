// Helpers for tests of the compact form (shardproof-plan/1.1): a config's
// compact twin, the check that the compact plan denotes the v1 plan, and
// verification per coordinate class.
#pragma once

#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/classes/class_verifier.h"
#include "engine/format/plan_parser.h"
#include "planner/planner.h"
#include "tests/graph_text.h"
#include "tests/test_support.h"

namespace shardproof::testing {

inline planner::PlanConfig compact(planner::PlanConfig c) {
  c.compact = true;
  return c;
}

// A two-layer transformer config at (dp, tp, pp, mb), then `edit` (which
// sets the option a suite is about).
template <class Edit>
planner::PlanConfig two_layers(int dp, int tp, int pp, int mb, Edit edit) {
  planner::PlanConfig c;
  c.layers = 2;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  c.microbatches = mb;
  edit(c);
  return c;
}

// `model` with `c` in the compact form is refused, naming `flag`.
inline void expect_compact_refused(const std::string& model, planner::PlanConfig c,
                                   const std::string& flag) {
  try {
    planner::generate_plan(model, compact(c));
    ADD_FAILURE() << "accepted; expected a refusal naming " << flag;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--compact does not support " + flag), std::string::npos)
        << e.what();
  }
}

// The expansion of the compact plan is the v1 plan: same name, meta,
// logical graph, tensors, ops, claims and groups.
inline void expect_same_plan(const std::string& model, const planner::PlanConfig& c) {
  nlohmann::json v1 = planner::generate_plan(model, c);
  nlohmann::json cc = planner::generate_plan(model, compact(c));
  ASSERT_EQ(v1["format"], "shardproof-plan/1");
  ASSERT_EQ(cc["format"], "shardproof-plan/1.1");
  EXPECT_EQ(v1["name"], cc["name"]);
  EXPECT_EQ(v1["meta"], cc["meta"]);
  EXPECT_EQ(v1["logical"], cc["logical"]);
  Plan a = parse(v1), b = parse(cc);
  EXPECT_EQ(a.parallel.ops.size(), b.parallel.ops.size()) << v1["name"];
  EXPECT_EQ(a.parallel.tensors.size(), b.parallel.tensors.size()) << v1["name"];
  EXPECT_EQ(first_difference(graph_by_name(a.parallel), graph_by_name(b.parallel)), "")
      << v1["name"] << " (v1 / expansion)";
}

// Verified per class (even when small enough to expand); `counts` says how
// many batches were reused.
inline Report by_classes(const nlohmann::json& plan, ClassRunCounts* counts = nullptr,
                         int jobs = 2) {
  ParseResult r =
      parse_plan_text(plan.dump(1), "plan.json", "", ParseOptions{ParseOptions::Compact::Classes});
  if (!r.plan) {
    Report bad;
    bad.verdict = Verdict::Invalid;
    bad.invalid = r.error;
    return bad;
  }
  VerifyOptions options;
  options.jobs = jobs;
  return verify_by_classes(*r.plan, options, counts);
}

// Whether a finding names `text` in its logical or parallel tensors.
inline bool mentions(const Report& r, const std::string& text) {
  for (const Finding& f : r.findings) {
    if (f.tensor.find(text) != std::string::npos) return true;
    for (const std::string& t : f.parallel_tensors)
      if (t.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace shardproof::testing
