// The compact plan form (shardproof-plan/1.1): the planner's compact mlp
// plans denote exactly its v1 plans (same tensors, ops, claims and groups)
// and verify alike, bugs included; the file does not grow with dp, tp or
// micro-batches; and a broken 1.1 plan is named at its compact template.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "engine/format/plan_parser.h"
#include "engine/format/v1/plan_validation.h"
#include "planner/planner.h"
#include "tests/graph_text.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::first_finding;
using testing::parse;

namespace fs = std::filesystem;

planner::PlanConfig config(int layers, int dp, int tp, int pp, int mb, const std::string& opt,
                           const std::string& bug = "", bool compact = false) {
  planner::PlanConfig c = testing::mlp_config(layers, dp, tp, pp, mb, opt, bug);
  c.batch = 16;
  c.compact = compact;
  return c;
}

void expect_same_plan(const planner::PlanConfig& c) {
  planner::PlanConfig cc = c;
  cc.compact = true;
  nlohmann::json v1 = planner::generate_plan("mlp", c), compact = planner::generate_plan("mlp", cc);
  ASSERT_EQ(compact["format"], "shardproof-plan/1.1");
  Plan a = parse(v1), b = parse(compact);
  ASSERT_EQ(a.parallel.ops.size(), b.parallel.ops.size()) << v1["name"];
  EXPECT_EQ(testing::first_difference(testing::graph_by_name(a.parallel),
                                      testing::graph_by_name(b.parallel)),
            "")
      << v1["name"] << " (v1 / expansion)";
}

// The expansion is the v1 graph, up to order, over dp/tp/pp/mb in {1,2,4}.
TEST(CompactPlan, ExpansionIsTheV1GraphOverTheMatrix) {
  for (int dp : {1, 2, 4})
    for (int tp : {1, 2, 4})
      for (int pp : {1, 2, 4})
        for (int mb : {1, 2, 4})
          expect_same_plan(config(4, dp, tp, pp, mb, (dp + tp + pp + mb) % 2 ? "adam" : "sgd"));
  // An odd layer count: a column layer with its output gathered, uneven stages.
  expect_same_plan(config(3, 2, 2, 2, 2, "sgd"));
  expect_same_plan(config(5, 1, 2, 3, 4, "adam"));
}

// Both forms verify to the same verdict, stages and findings.
TEST(CompactPlan, SameVerdictAsV1) {
  for (int dp : {1, 2, 4})
    for (int tp : {1, 2, 4})
      for (int pp : {1, 2, 4})
        for (int mb : {1, 2, 4}) {
          if ((dp + tp + pp + mb) % 3 != 0) continue;  // a third of the matrix: time
          planner::PlanConfig c = config(4, dp, tp, pp, mb, mb == 2 ? "adam" : "sgd");
          Report a = testing::verify_json(planner::generate_plan("mlp", c), "v1");
          c.compact = true;
          Report b = testing::verify_json(planner::generate_plan("mlp", c), "compact");
          EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
          EXPECT_EQ(a.verdict, b.verdict) << testing::explain(b);
          // Stage numbers and counts follow the op order, which differs
          // (the expansion is program-major, the v1 planner layer-major).
          EXPECT_EQ(a.findings.size(), b.findings.size());
        }
}

// Every catalogue bug is found through the compact form, first where v1 finds it.
TEST(CompactPlan, EveryMlpBugFoundWithTheSameFirstFinding) {
  for (const planner::BugInfo& bug : planner::list_bugs("mlp")) {
    planner::PlanConfig c = config(4, 2, 2, 2, 2, "sgd", bug.name);
    expect_same_plan(c);
    Report a = testing::verify_json(planner::generate_plan("mlp", c), "v1-bug");
    c.compact = true;
    Report b = testing::verify_json(planner::generate_plan("mlp", c), "compact-bug");
    EXPECT_EQ(a.verdict, Verdict::NotEquivalent) << bug.name << "\n" << testing::explain(a);
    EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << bug.name << "\n" << testing::explain(b);
    EXPECT_EQ(first_finding(a), first_finding(b)) << bug.name;
    EXPECT_EQ(a.findings.size(), b.findings.size()) << bug.name;
  }
}

nlohmann::json compact_plan(int dp, int tp, int mb) {
  planner::PlanConfig c = config(4, dp, tp, 2, mb, "adam", "", true);
  c.batch = 256;
  c.hidden = 64;
  return planner::generate_plan("mlp", c);
}

size_t compact_size(int dp, int tp, int mb) {
  return compact_plan(dp, tp, mb).dump(1).size();
}

// Templates per program: the structure, apart from digits.
std::vector<size_t> templates(const nlohmann::json& plan) {
  std::vector<size_t> n;
  for (const auto& p : plan["parallel"]["programs"]) {
    n.push_back(p["tensors"].size());
    n.push_back(p["ops"].size());
  }
  return n;
}

// The file does not grow with dp, tp or micro-batches: the same templates,
// and a size that differs by digits only (sizes, slice constants, the last
// micro-batch's number). From 4 micro-batches on, the accumulation chain
// has all its links (first, middle, last), so mb4 is the reference.
TEST(CompactPlan, SizeDoesNotDependOnDpTpOrMicrobatches) {
  auto near = [](size_t a, size_t b) { return (a > b ? a - b : b - a) * 100 <= a; };  // 1%
  EXPECT_PRED2(near, compact_size(2, 2, 4), compact_size(8, 2, 4));
  EXPECT_PRED2(near, compact_size(2, 2, 4), compact_size(2, 8, 4));
  EXPECT_PRED2(near, compact_size(2, 2, 4), compact_size(2, 2, 16));
  EXPECT_EQ(templates(compact_plan(2, 2, 4)), templates(compact_plan(8, 8, 16)));
  // While the v1 form grows with every degree.
  planner::PlanConfig c = config(4, 8, 8, 2, 16, "adam");
  c.batch = 256;
  c.hidden = 64;
  EXPECT_GT(planner::generate_plan("mlp", c).dump(1).size(), 50 * compact_size(8, 8, 16));
}

// --- invalid 1.1 plans -------------------------------------------------

nlohmann::json example() {
  std::ifstream in(fs::path(SHARDPROOF_SOURCE_DIR) / "examples" / "compact-dp2-tp2-mb2.json");
  return nlohmann::json::parse(in);
}

// Line (1-based) of the first line of `text` holding `marker`.
int line_of(const std::string& text, const std::string& marker) {
  size_t at = text.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

// Parses `plan`; expects `rule` at `pointer`, on the line holding `marker`.
Diagnostic invalid(const nlohmann::json& plan, const std::string& rule, const std::string& pointer,
                   const std::string& marker, ParseOptions options = {}) {
  std::string text = plan.dump(1);
  ParseResult r = parse_plan_text(text, "plan.json", "", options);
  if (!r.error) {
    ADD_FAILURE() << "expected [" << rule << "], the plan was accepted";
    return {};
  }
  const Diagnostic& d = *r.error;
  EXPECT_EQ(d.rule, rule) << d.to_string();
  EXPECT_EQ(d.pointer, pointer) << d.to_string();
  EXPECT_EQ(d.file, "plan.json") << d.to_string();
  if (!marker.empty()) {
    EXPECT_EQ(d.line, line_of(text, marker)) << d.to_string();
  }
  return d;
}

nlohmann::json& program(nlohmann::json& plan) {
  return plan["parallel"]["programs"][0];
}

TEST(CompactPlan, TheExampleIsValid) {
  Plan p = parse(example());
  EXPECT_EQ(p.format, "shardproof-plan/1.1");
  EXPECT_EQ(p.parallel.world, 4);
  Report r = testing::verify_json(example(), "compact-example");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(CompactPlan, BadExpression) {
  nlohmann::json p = example();
  program(p)["tensors"][1]["of"]["slice"][1][0] = "tp*dp";
  Diagnostic d = invalid(p, "compact-expr", "/parallel/programs/0/tensors/1/of/slice/1/0", "tp*dp");
  EXPECT_NE(d.message.find("not affine"), std::string::npos) << d.message;
  program(p)["tensors"][1]["of"]["slice"][1][0] = "tp*2 +";
  invalid(p, "compact-expr", "/parallel/programs/0/tensors/1/of/slice/1/0", "tp*2 +");
  p = example();
  program(p)["ops"][0]["name"] = "mm{dp";
  invalid(p, "compact-expr", "/parallel/programs/0/ops/0/name", "mm{dp");
  p = example();
  program(p)["ops"][2]["when"] = "mb != 0";
  invalid(p, "compact-expr", "/parallel/programs/0/ops/2/when", "mb != 0");
}

// An item of a list attribute may be {"expr": E} (a random op's offsets):
// each instance gets its integers; any other object there is refused.
TEST(CompactPlan, ListAttributeItemsAreExpressions) {
  nlohmann::json p = example();
  // The example's colsum is per micro-batch: its dims become [mb - mb] = [0].
  program(p)["ops"][1]["attrs"]["dims"] = nlohmann::json::array({{{"expr", "mb - mb"}}});
  Plan plan = parse(p);
  int seen = 0;
  for (const Op& op : plan.parallel.ops)
    if (op.op == "sum") {
      EXPECT_EQ(op.attrs.at("dims").list.size(), 1u) << op.name;
      EXPECT_EQ(op.attrs.at("dims").list.at(0).as_int(), 0) << op.name;
      ++seen;
    }
  EXPECT_EQ(seen, 8);
  Report r = testing::verify_json(p, "list-attr");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  // dims [1 - mb]: micro-batch 1 sums over dim 0, micro-batch 0 over dim 1.
  program(p)["ops"][1]["attrs"]["dims"] = nlohmann::json::array({{{"expr", "1 - mb"}}});
  EXPECT_NE(testing::verify_json(p, "list-attr-bad").verdict, Verdict::Equivalent);
  program(p)["ops"][1]["attrs"]["dims"] = nlohmann::json::array({{{"value", 0}}});
  invalid(p, "compact-expr", "/parallel/programs/0/ops/1/attrs/dims/0", "");
}

TEST(CompactPlan, UnknownAxis) {
  nlohmann::json p = example();
  program(p)["tensors"][1]["name"] = "pp{pp}.dp{dp}.tp{tp}.w";
  invalid(p, "compact-axis", "/parallel/programs/0/tensors/1/name", "pp{pp}.dp{dp}");
  p = example();
  p["parallel"]["mesh"]["axes"][0][0] = "xp";
  invalid(p, "mesh", "/parallel/mesh/axes/0/0", "xp");
}

TEST(CompactPlan, GroupOverAnAxisTheProgramDoesNotVary) {
  nlohmann::json p = example();
  program(p)["on"] = "dp <= 1";
  invalid(p, "compact-group", "/parallel/programs/0/ops/4/group/0", "\"dp\"\n");
  p = example();
  program(p)["ops"][4]["group"] = nlohmann::json::array({"mb"});
  invalid(p, "compact-group", "/parallel/programs/0/ops/4/group/0", "\"mb\"\n");
  p = example();
  program(p)["ops"][0]["group"] = nlohmann::json::array({"tp"});
  invalid(p, "compact-group", "/parallel/programs/0/ops/0/group", "");
}

TEST(CompactPlan, SendOffTheMesh) {
  nlohmann::json p = example();
  program(p)["tensors"].push_back(
      {{"name", "dp{dp}.tp{tp}.copy"}, {"shape", {2}}, {"dtype", "f32"}});
  program(p)["ops"].push_back({{"name", "dp{dp}.tp{tp}.send"},
                               {"op", "send"},
                               {"in", {"dp{dp}.tp{tp}.s"}},
                               {"out", {"dp{dp}.tp{tp}.copy"}},
                               {"to", {{"dp", 1}}}});
  Diagnostic d = invalid(p, "send-off-mesh", "/parallel/programs/0/ops/5/to", "\"to\"");
  EXPECT_NE(d.message.find("dp=1 tp=0"), std::string::npos) << d.message;
  // Limited to the instances that have a destination, it is valid.
  program(p)["ops"][5]["when"] = "dp == 0";
  program(p)["tensors"][7]["when"] = "dp == 1";
  parse(p);
}

TEST(CompactPlan, NameCollisionBetweenInstances) {
  nlohmann::json p = example();
  program(p)["tensors"][1]["name"] = "tp{tp}.w";
  Diagnostic d =
      invalid(p, "instance-collision", "/parallel/programs/0/tensors/1/name", "\"tp{tp}.w\"");
  EXPECT_NE(d.message.find("dp=1 tp=0"), std::string::npos) << d.message;
  p = example();
  program(p)["ops"][0]["name"] = "dp{dp}.mm";
  invalid(p, "instance-collision", "/parallel/programs/0/ops/0/name", "\"dp{dp}.mm\"");
}

TEST(CompactPlan, ExpansionLimit) {
  nlohmann::json p = example();
  p["parallel"]["mesh"]["axes"] = nlohmann::json::array(
      {nlohmann::json::array({"dp", 1024}), nlohmann::json::array({"tp", 1024})});
  p["parallel"]["mesh"]["mb"] = 16;
  // Asked to expand, the parser refuses (after counting, never building).
  Diagnostic d = invalid(p, "plan-too-large", "/parallel/programs/0/tensors/0", "",
                         ParseOptions{ParseOptions::Compact::Expand});
  EXPECT_NE(d.message.find("per coordinate class"), std::string::npos) << d.message;
  // By default such a plan is kept unexpanded for the class verifier.
  ParseResult r = parse_plan_text(p.dump(1), "plan.json", "");
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  EXPECT_TRUE(r.plan->compact);
  EXPECT_TRUE(r.plan->parallel.ops.empty());
}

// A v1 rule broken by the expansion is named at the template and instance.
TEST(CompactPlan, V1RulesPointAtTheTemplate) {
  nlohmann::json p = example();
  program(p)["ops"][3]["in"][0] = "dp{dp}.tp{tp}.acc{mb-2}";
  Diagnostic d = invalid(p, "undeclared-tensor", "/parallel/programs/0/ops/3/in/0", "acc{mb-2}");
  EXPECT_NE(d.message.find("(instance dp=0 tp=0 mb=1)"), std::string::npos) << d.message;
  p = example();
  program(p)["tensors"][2]["of"]["slice"][1][1] = "tp*2 + 3";
  invalid(p, "lineage-shape", "/parallel/programs/0/tensors/2/shape", "");
  p = example();
  program(p)["ops"][4]["in"][0] = "dp{dp}.tp{tp}.mb{mb}.y";
  d = invalid(p, "op-shape", "/parallel/programs/0/tensors/6/shape", "");
}

// A /1 plan never uses the compact keys: they stay unknown keys.
TEST(CompactPlan, V1PlanWithACompactFieldIsRejectedAsBefore) {
  std::ifstream in(fs::path(SHARDPROOF_SOURCE_DIR) / "examples" / "tp2-ffn.json");
  nlohmann::json p = nlohmann::json::parse(in);
  p["parallel"]["mesh"] = {{"axes", {{"tp", 2}}}};
  invalid(p, "unknown-key", "/parallel/mesh", "\"mesh\"");
  p = nlohmann::json::parse(
      std::ifstream(fs::path(SHARDPROOF_SOURCE_DIR) / "examples" / "tp2-ffn.json"));
  p["parallel"]["ops"][0]["when"] = "tp == 0";
  invalid(p, "unknown-key", "/parallel/ops/0/when", "\"when\"");
  // And a 1.1 plan does not take v1's rank-by-rank graph.
  p = nlohmann::json::parse(
      std::ifstream(fs::path(SHARDPROOF_SOURCE_DIR) / "examples" / "tp2-ffn.json"));
  p["format"] = "shardproof-plan/1.1";
  invalid(p, "unknown-key", "/parallel/inputs", "");
}

}  // namespace
}  // namespace shardproof
