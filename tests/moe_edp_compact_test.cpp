// The expert mesh (1 < ep < dp) in the compact form: dp rank d is written
// as two mesh axes, dp = d / ep (its place in its edp group) and ep = d % ep
// (transformer_plan.cpp), so an ep group is a line along ep, an edp group a
// line along dp and the dense dp group the plane (dp, ep). Its expansion is
// the v1 plan; verified per coordinate class it gives the v1 plan's verdict,
// correct and with each expert-mesh bug the compact form writes (also under
// cp, and at DeepSeek-V3's shapes); the bugs it cannot write are refused by
// name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/graph_text.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::by_classes;
using testing::compact;
using testing::expect_same_plan;

using nlohmann::json;
using planner::PlanConfig;

const char* const kTiny = "moe-tiny";

PlanConfig edp(int dp, int ep, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(2, dp, 1, 1, 1);
  c.ep = ep;
  if (edit) edit(c);
  return c;
}

// Every kind the compact form writes, on ep groups of 2 and 4, edp groups
// of 2 and 4.
TEST(MoeEdpCompact, ExpansionIsTheV1Plan) {
  for (int tp : {1, 2})
    for (int mb : {1, 3})
      for (int pp : {1, 2}) {
        PlanConfig c = edp(4, 2);
        c.tp = tp, c.microbatches = mb, c.pp = pp;
        c.optimizer = (tp + mb + pp) % 2 ? "adam" : "sgd";
        expect_same_plan(kTiny, c);
      }
  expect_same_plan(kTiny, edp(8, 2));
  expect_same_plan(kTiny, edp(8, 4, [](PlanConfig& c) { c.microbatches = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.batch = 8; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.zero = 1, c.tp = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.zero = 2, c.microbatches = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.zero = 2, c.tp = 2, c.pp = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.sp = true, c.tp = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.bias = true, c.tp = 2; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) { c.tie_embeddings = true; }));
  expect_same_plan(kTiny, edp(4, 2, [](PlanConfig& c) {
                     c.layers = 4, c.pp = 2, c.vpp = 2, c.microbatches = 2;
                   }));
}

// The mesh and the groups of the expert mesh, as the compact file says them.
TEST(MoeEdpCompact, GroupsAreLinesOfTheExpertMesh) {
  const json plan = planner::generate_plan(kTiny, compact(edp(4, 2)));
  EXPECT_EQ(plan["parallel"]["mesh"]["axes"],
            json::parse(R"([["pp",1],["dp",2],["ep",2],["tp",1]])"));
  auto group_of = [&](const std::string& name) {
    for (const json& op : plan["parallel"]["programs"][0]["ops"])
      if (op.value("name", "") == name) return op["group"];
    ADD_FAILURE() << "no op template " << name;
    return json();
  };
  EXPECT_EQ(group_of("dp{dp*2}.tp{tp}.pp0.mb{mb}.l1.moe.xin.ep_dispatch"), json({"ep"}));
  EXPECT_EQ(group_of("dp{ep}.tp{tp}.pp0.grad.l1.moe.wg.dp_all_reduce"), json({"dp"}));
  EXPECT_EQ(group_of("dp0.tp{tp}.pp0.grad.l1.moe.wsg.dp_all_reduce"), json({"dp", "ep"}));
}

// The file does not grow with dp, ep or edp: DeepSeek-V3's shapes at 4
// layers on 2 stages, the same templates and a size that differs by digits
// only (within 2%: batch and expert bounds gain a digit or two).
TEST(MoeEdpCompact, SizeDoesNotDependOnTheExpertMesh) {
  auto plan = [](int dp, int ep) {
    PlanConfig c = testing::transformer_config(4, dp, 2, 2, 4);
    c.ep = ep, c.seq = 8, c.compact = true;
    return planner::generate_plan("deepseek-v3", c);
  };
  auto templates = [](const json& p) {
    std::vector<size_t> n;
    for (const json& prog : p["parallel"]["programs"])
      n.insert(n.end(), {prog["tensors"].size(), prog["ops"].size()});
    return n;
  };
  auto near = [](size_t a, size_t b) { return (a > b ? a - b : b - a) * 50 <= a; };
  const json ref = plan(16, 4);
  for (const json& other : {plan(64, 8), plan(256, 32), plan(1024, 32)}) {
    EXPECT_EQ(templates(ref), templates(other)) << other["name"];
    EXPECT_PRED2(near, ref["parallel"].dump().size(), other["parallel"].dump().size())
        << other["name"];
  }
}

// Correct plans: the compact one per coordinate class and the v1 one both
// equivalent. dp 12 ep 2 has an interior class along dp (edp 6).
struct Case {
  std::string label;
  PlanConfig config;
};

class MoeEdpCompactCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEdpCompactCorrect, EquivalentByClassesAndExpanded) {
  const PlanConfig& c = GetParam().config;
  Report a = testing::verify_json(planner::generate_plan(kTiny, c), "edp-v1-" + GetParam().label);
  Report b = by_classes(planner::generate_plan(kTiny, compact(c)));
  EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::Equivalent) << testing::explain(b);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, MoeEdpCompactCorrect,
    ::testing::Values(
        Case{"dp4_ep2", edp(4, 2)},
        Case{"dp4_ep2_tp2_mb2", edp(4, 2, [](PlanConfig& c) { c.tp = 2, c.microbatches = 2; })},
        Case{"dp4_ep2_zero2_mb2", edp(4, 2, [](PlanConfig& c) { c.zero = 2, c.microbatches = 2; })},
        Case{"dp4_ep2_zero1_pp2",
             edp(4, 2, [](PlanConfig& c) { c.zero = 1, c.pp = 2, c.microbatches = 2; })},
        Case{"dp12_ep2", edp(12, 2)},
        // cp: expert blocks summed over edp x cp, at ep = dp over cp.
        Case{"dp4_ep2_cp2", edp(4, 2, [](PlanConfig& c) { c.cp = 2; })},
        Case{"dp2_ep2_cp2_tp2_sp",
             edp(2, 2, [](PlanConfig& c) { c.cp = 2, c.tp = 2, c.sp = true; })}),
    [](const auto& info) { return info.param.label; });

// Each expert-mesh bug the compact form writes: found per coordinate class
// first at its tensor, as in the v1 plan.
struct BugCase {
  std::string bug;
  PlanConfig config;
  std::string label = "";  // the test's name, when not the bug's
};

class MoeEdpCompactBug : public ::testing::TestWithParam<BugCase> {};

TEST_P(MoeEdpCompactBug, FoundAtItsTensorAsInTheV1Plan) {
  PlanConfig c = GetParam().config;
  c.bug = GetParam().bug;
  expect_same_plan(kTiny, c);
  const json plan = planner::generate_plan(kTiny, compact(c));
  Report a = testing::verify_json(planner::generate_plan(kTiny, c), "edp-v1-" + c.bug);
  Report b = by_classes(plan);
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  EXPECT_EQ(b.findings[0].kind, "mismatch") << testing::explain(b);
  EXPECT_EQ(b.findings[0].tensor, plan["meta"]["bug_first_tensor"]) << testing::explain(b);
  EXPECT_EQ(testing::first_finding(a), testing::first_finding(b));
}

std::vector<BugCase> bug_cases() {
  auto bug = [](const char* name, PlanConfig c) { return BugCase{name, c}; };
  return {
      bug("expert-grad-on-dp-group", edp(4, 2)),
      bug("expert-grad-not-synced", edp(4, 2, [](PlanConfig& c) { c.microbatches = 2; })),
      bug("shared-expert-grad-on-edp-group", edp(4, 2)),
      bug("expert-grad-averaged-over-edp", edp(4, 2, [](PlanConfig& c) { c.tp = 2; })),
      bug("router-grad-not-synced", edp(4, 2)),
      bug("all-to-all-dims-swapped", edp(4, 2, [](PlanConfig& c) { c.batch = 8; })),
      bug("expert-out-not-reduced-tp", edp(4, 2, [](PlanConfig& c) { c.tp = 2; })),
      bug("expert-grad-not-reduced-tp", edp(4, 2, [](PlanConfig& c) { c.tp = 2; })),
      bug("moe-combine-missing-shared", edp(4, 2)),
      bug("dp-grad-not-synced", edp(4, 2)),
      // Under cp the expert blocks are summed over edp x cp.
      BugCase{"expert-grad-not-synced", edp(4, 2, [](PlanConfig& c) { c.cp = 2; }),
              "expert_grad_not_synced_cp2"},
  };
}

INSTANTIATE_TEST_SUITE_P(Dp4Ep2, MoeEdpCompactBug, ::testing::ValuesIn(bug_cases()),
                         [](const auto& info) {
                           std::string name =
                               info.param.label.empty() ? info.param.bug : info.param.label;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// DeepSeek-V3's published shapes at 4 layers (layer 3 MoE) on dp4 ep2 tp2
// pp2 with 2 micro-batches, compact, per coordinate class: equivalent, and
// the expert gradient on the dp group found at its tensor (as the v1 plan's
// DeepseekV3Edp test finds it).
TEST(DeepseekV3EdpCompact, PublishedShapesEquivalentAndDpGroupBugFound) {
  PlanConfig c = testing::transformer_config(4, 4, 2, 2, 2);
  c.ep = 2, c.compact = true;
  Report r = by_classes(planner::generate_plan("deepseek-v3", c));
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  c.bug = "expert-grad-on-dp-group";
  r = by_classes(planner::generate_plan("deepseek-v3", c));
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "grad.l3.moe.wg") << testing::explain(r);
}

// The bugs the compact form cannot write on the expert mesh are refused by
// name, never written as a correct plan: a shard at d mod edp (not affine in
// dp and ep), a group in reverse order, a hook of the expanded form only.
TEST(MoeEdpCompact, RefusesTheBugsItCannotWrite) {
  for (const char* bug :
       {"zero-expert-shard-dp-rank", "all-to-all-wrong-order", "expert-grad-scaled-by-dp"}) {
    PlanConfig c = compact(edp(4, 2));
    if (std::string(bug) == "zero-expert-shard-dp-rank") c.zero = 1;
    c.bug = bug;
    try {
      planner::generate_plan(kTiny, c);
      ADD_FAILURE() << bug << " was written";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--compact does not support --bug " + std::string(bug)),
                std::string::npos)
          << e.what();
    }
  }
}

// A hole is read as a mixed-radix number only when it is one: "dp + ep"
// (dp 0 ep 1 and dp 1 ep 0 give one name) is never answered equivalent.
TEST(MoeEdpCompact, AHoleThatIsNoMixedRadixNumberIsNeverEquivalent) {
  json plan = planner::generate_plan(kTiny, compact(edp(4, 2)));
  const std::string from = "dp{dp*2 + ep}.", to = "dp{dp + ep}.";
  std::string dump = plan.dump();
  size_t edited = 0;
  for (size_t at = dump.find(from); at != std::string::npos; at = dump.find(from, at)) {
    dump.replace(at, from.size(), to);
    ++edited;
  }
  ASSERT_GT(edited, 0u);
  plan = json::parse(dump);
  Report r = by_classes(plan);
  EXPECT_NE(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.verdict, Verdict::Unknown) << testing::explain(r);
}

}  // namespace
}  // namespace shardproof
