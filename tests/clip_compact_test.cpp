// Gradient clipping (--clip) in the compact form: each stage's program sums
// its pieces' squares, and a program on every stage all-reduces the totals
// over the pp axis and computes the coefficient (transformer_clip.cpp). Its
// expansion is the v1 plan; per coordinate class it is equivalent at a mesh
// the v1 plan would be large on, and each of the norm's bugs is found at the
// norm's total; what it cannot write yet is refused by name.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using planner::PlanConfig;
using testing::by_classes;
using testing::compact;
using testing::expect_same_plan;

PlanConfig clipped(
    int dp, int tp, int pp, int mb, void (*edit)(PlanConfig&) = [](PlanConfig&) {}) {
  return testing::two_layers(dp, tp, pp, mb, [&](PlanConfig& c) {
    c.clip = true;
    edit(c);
  });
}

TEST(ClipCompact, ExpansionIsTheV1Plan) {
  for (int dp : {1, 2})
    for (int tp : {1, 2})
      for (int pp : {1, 2})
        for (int mb : {1, 2}) expect_same_plan("llama3-tiny", clipped(dp, tp, pp, mb));
  expect_same_plan("llama3-tiny", clipped(2, 2, 2, 2, [](PlanConfig& c) { c.zero = 1; }));
  expect_same_plan("llama3-tiny", clipped(2, 2, 2, 1, [](PlanConfig& c) { c.zero = 2; }));
  expect_same_plan("llama3-tiny", clipped(2, 1, 2, 1, [](PlanConfig& c) { c.cp = 2; }));
  expect_same_plan("llama3-tiny", clipped(2, 1, 2, 1, [](PlanConfig& c) { c.cp = 2, c.zero = 1; }));
  expect_same_plan("llama3-tiny", clipped(1, 2, 2, 2, [](PlanConfig& c) { c.sp = true; }));
  expect_same_plan("llama3-tiny", clipped(2, 2, 3, 3, [](PlanConfig& c) { c.layers = 3; }));
}

// MoE: the experts' total is all-reduced over the ranks whose blocks differ
// (the ep group, or every rank under ZeRO on the expert mesh), the dense
// total as for llama, and clip.ss is their sum.
TEST(ClipCompact, MoeExpansionIsTheV1Plan) {
  for (int dp : {2, 4})
    for (int ep : {1, 2, 4})
      for (int zero : {0, 1}) {
        if (ep > dp) continue;
        PlanConfig c = clipped(dp, 1, 2, 1);
        c.ep = ep;
        c.zero = zero;
        expect_same_plan("moe-tiny", c);
        c.tp = 2;
        expect_same_plan("moe-tiny", c);
        if (ep >= 2 && zero == 0) {
          c.bug = "clip-norm-missing-ep";
          expect_same_plan("moe-tiny", c);
        }
      }
  PlanConfig c = clipped(2, 1, 1, 1);
  c.ep = 2;
  c.cp = 2;
  expect_same_plan("moe-tiny", c);
}

TEST(ClipCompact, TheNormsBugsHaveTheV1Expansion) {
  for (const char* bug :
       {"clip-norm-local-shard", "clip-norm-replicated-counted-tp", "clip-norm-missing-pp"}) {
    PlanConfig c = clipped(2, 2, 2, 2);
    c.bug = bug;
    expect_same_plan("llama3-tiny", c);
    c.zero = 1;
    expect_same_plan("llama3-tiny", c);
  }
}

// dp 4, tp 2, pp 4 and 4 micro-batches: the classes have runs in every axis,
// and the norm's all-reduce spans the four stages.
PlanConfig wide(const std::string& bug = "", bool zero = false) {
  PlanConfig c = compact(clipped(4, 2, 4, 4));
  c.layers = 4;
  c.bug = bug;
  c.zero = zero ? 1 : 0;
  return c;
}

TEST(ClipCompact, PerClassEquivalentWithAndWithoutZero) {
  for (bool zero : {false, true}) {
    Report r = by_classes(planner::generate_plan("llama3-tiny", wide("", zero)));
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << zero << "\n" << testing::explain(r);
  }
}

TEST(ClipCompact, PerClassEachNormBugIsFoundAtTheTotal) {
  // (Under ZeRO the norm's group is every rank: one bug is enough there.)
  for (const auto& [bug, zero] : {std::pair{"clip-norm-local-shard", false},
                                  {"clip-norm-replicated-counted-tp", false},
                                  {"clip-norm-missing-pp", false},
                                  {"clip-norm-missing-pp", true}}) {
    Report r = by_classes(planner::generate_plan("llama3-tiny", wide(bug, zero)));
    ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << bug << "\n" << testing::explain(r);
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings.front().tensor, "clip.ss") << bug << "\n" << testing::explain(r);
  }
}

// Per class on the expert mesh (dp4 ep2, two stages): equivalent, and the
// experts left out of the norm's group are found at their total.
TEST(ClipCompact, MoePerClassEquivalentAndMissingEpFound) {
  PlanConfig c = compact(clipped(4, 1, 2, 2));
  c.ep = 2;
  Report ok = by_classes(planner::generate_plan("moe-tiny", c));
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
  c.bug = "clip-norm-missing-ep";
  Report r = by_classes(planner::generate_plan("moe-tiny", c));
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(r.findings.front().tensor, "clip.expert.ss") << testing::explain(r);
}

TEST(ClipCompact, WhatItCannotWriteIsRefusedByName) {
  PlanConfig c = clipped(2, 1, 1, 1);
  c.bug = "clip-before-reduce";
  testing::expect_compact_refused("llama3-tiny", c, "--bug clip-before-reduce");
}

}  // namespace
}  // namespace shardproof
