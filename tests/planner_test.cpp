// The plan generator: every parallel configuration of a small mlp generates
// a plan the parser accepts; structural facts checked without the parser
// (world size, op counts, lineage on inputs and outputs, complete part sets,
// coverage of the logical outputs); the bug catalogue; config validation.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "planner/planner.h"
#include "tests/planner_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using planner::PlanConfig;

PlanConfig config(int layers, int dp, int tp, int pp, int mb, const std::string& optimizer = "sgd",
                  const std::string& bug = "") {
  return testing::mlp_config(layers, dp, tp, pp, mb, optimizer, bug);
}

using testing::describe;

// Writes the plan to a temporary file and parses it; "" when valid.
std::string parse_error(const json& plan) {
  auto dir = std::filesystem::temp_directory_path() / "shardproof-planner-tests";
  std::filesystem::create_directories(dir);
  auto path = dir / ("plan-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << plan.dump(1);
  ParseResult r = parse_plan_file(path.string());
  if (r.plan) return "";
  return r.error ? r.error->to_string() : "io: " + r.io_error;
}

int count_ops(const json& graph, bool collective) {
  int n = 0;
  for (const json& op : graph["ops"]) n += op.contains("group") == collective;
  return n;
}

// Every rank-local check the parser would also make, done here without it.
void check_structure(const json& plan, const PlanConfig& c) {
  SCOPED_TRACE(describe(c));
  const json& lg = plan["logical"];
  const json& pg = plan["parallel"];
  ASSERT_EQ(plan["format"], "shardproof-plan/1");
  ASSERT_EQ(pg["world"], c.dp * c.tp * c.pp);
  std::set<int> ranks_used;
  // Claims: shape equals the slice extent; part sets complete.
  std::map<std::tuple<std::string, std::string, int>, std::set<int>> part_sets;
  for (const auto& [name, t] : pg["tensors"].items()) {
    ASSERT_TRUE(t.contains("rank")) << name;
    int r = t["rank"];
    ASSERT_GE(r, 0);
    ASSERT_LT(r, pg["world"].get<int>());
    ranks_used.insert(r);
    if (!t.contains("of")) continue;
    const json& of = t["of"];
    const std::string logical = of["tensor"];
    ASSERT_TRUE(lg["tensors"].contains(logical)) << name;
    json extent = lg["tensors"][logical]["shape"];
    if (of.contains("slice"))
      for (size_t d = 0; d < of["slice"].size(); ++d)
        extent[d] = of["slice"][d][1].get<int>() - of["slice"][d][0].get<int>();
    EXPECT_EQ(t["shape"], extent) << name;
    if (of.contains("part"))
      part_sets[{logical, of.value("slice", json()).dump(), of["part"][1].get<int>()}].insert(
          of["part"][0].get<int>());
  }
  EXPECT_EQ(static_cast<int>(ranks_used.size()), c.dp * c.tp * c.pp) << "every rank holds work";
  for (const auto& [key, ks] : part_sets) {
    int n = std::get<2>(key);
    EXPECT_EQ(static_cast<int>(ks.size()), n) << "incomplete part set of " << std::get<0>(key);
    EXPECT_EQ(*ks.rbegin(), n - 1);
  }
  for (const char* list : {"inputs", "outputs"})
    for (const json& name : pg[list])
      EXPECT_TRUE(pg["tensors"][name.get<std::string>()].contains("of"))
          << list << " " << name << " has no lineage";
  // Coverage: every element of every logical output is claimed by a
  // parallel output (part sets are complete, checked above).
  for (const json& out : lg["outputs"]) {
    const json shape = lg["tensors"][out.get<std::string>()]["shape"];
    int64_t rows = shape.empty() ? 1 : shape[0].get<int64_t>();
    int64_t cols = shape.empty() ? 1 : shape[1].get<int64_t>();
    std::vector<bool> covered(rows * cols, false);
    for (const json& po : pg["outputs"]) {
      const json& of = pg["tensors"][po.get<std::string>()]["of"];
      if (of["tensor"] != out) continue;
      int64_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;
      if (of.contains("slice") && !shape.empty()) {
        r0 = of["slice"][0][0], r1 = of["slice"][0][1];
        c0 = of["slice"][1][0], c1 = of["slice"][1][1];
      }
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = c0; j < c1; ++j) covered[i * cols + j] = true;
    }
    EXPECT_EQ(std::count(covered.begin(), covered.end(), false), 0) << out << " not covered";
  }
}

// Parallel ops of an L=4 plan. Per micro-batch replica: forward 4 matmul +
// 3 gelu, loss 4 + seed 1, backward 4 wgrad + 3 dgrad + 3 dgelu + 3 mul
// (= 6L + 1); per rank: L optimizer steps and (mb - 1) adds for each of the
// L gradients and the loss.
int expected_local_ops(const PlanConfig& c) {
  const int L = c.layers, mb = c.microbatches;
  return c.dp * c.tp * (mb * (6 * L + 1) + L + (mb - 1) * (L + 1));
}

// Sends: one forward and one backward per boundary, replica and micro-batch.
// tp: per (dp rank, micro-batch) all-reduces of layers 1 and 3 forward and
// layer 2 backward. dp: one all-reduce per weight and tp rank, and the loss.
int expected_collectives(const PlanConfig& c) {
  int n = 2 * c.dp * c.tp * c.microbatches * (c.pp - 1);
  if (c.tp > 1) n += 3 * c.dp * c.microbatches;
  if (c.dp > 1) n += (c.layers + 1) * c.tp;
  return n;
}

TEST(Planner, ListsModelsAndBugs) {
  std::vector<std::string> models = planner::list_models();
  for (const char* required : {"mlp", "llama3-8b", "llama3-70b", "llama3-405b", "llama3-tiny"})
    EXPECT_NE(std::find(models.begin(), models.end(), required), models.end()) << required;
  std::set<std::string> names;
  for (const planner::BugInfo& b : planner::list_bugs("mlp")) {
    names.insert(b.name);
    EXPECT_FALSE(b.description.empty()) << b.name;
    EXPECT_FALSE(b.real_world.empty()) << b.name;
    EXPECT_FALSE(b.first_tensor_hint.empty()) << b.name;
  }
  for (const char* required :
       {"drop-tp-allreduce", "allreduce-mean-not-sum", "dp-grad-not-synced", "swapped-shards",
        "pp-send-wrong-tensor", "loss-scale-wrong-microbatch-count"})
    EXPECT_TRUE(names.count(required)) << required;
  EXPECT_THROW(planner::list_bugs("transformer-xl"), std::invalid_argument);
}

// Every dp, tp, pp in {1, 2, 4} and microbatches in {1, 2} on hidden 8,
// batch 8, layers 4: generates, is structurally sound, and parses.
TEST(Planner, EveryConfigurationGeneratesAValidPlan) {
  for (const PlanConfig& c : testing::mlp_config_matrix()) {
    SCOPED_TRACE(describe(c));
    json plan = planner::generate_plan("mlp", c);
    check_structure(plan, c);
    EXPECT_EQ(count_ops(plan["logical"], false), 7 * c.layers);
    EXPECT_EQ(count_ops(plan["parallel"], false), expected_local_ops(c));
    EXPECT_EQ(count_ops(plan["parallel"], true), expected_collectives(c));
    EXPECT_EQ(parse_error(plan), "");
  }
}

TEST(Planner, OddAndSingleLayerModelsGenerateValidPlans) {
  for (int layers : {1, 2, 3, 5})
    for (int tp : {1, 2})
      for (int pp : {1, 2}) {
        if (pp > layers) continue;
        PlanConfig c = config(layers, 2, tp, pp, 2, layers % 2 ? "sgd" : "adam");
        SCOPED_TRACE(describe(c));
        json plan = planner::generate_plan("mlp", c);
        check_structure(plan, c);
        EXPECT_EQ(parse_error(plan), "");
      }
}

TEST(Planner, OddLastLayerIsGatheredOverTp) {
  json plan = planner::generate_plan("mlp", config(3, 1, 2, 1, 1));
  int gathers = 0;
  for (const json& op : plan["parallel"]["ops"]) gathers += op["op"] == "all_gather";
  EXPECT_EQ(gathers, 1);
}

TEST(Planner, LogicalGraphDependsOnlyOnTheModel) {
  json a = planner::generate_plan("mlp", config(4, 1, 1, 1, 1));
  json b = planner::generate_plan("mlp", config(4, 2, 4, 2, 2));
  EXPECT_EQ(a["logical"], b["logical"]);
  EXPECT_FALSE(a["logical"].contains("world"));
}

TEST(Planner, NamesRanksAndExactConstants) {
  json plan = planner::generate_plan("mlp", config(2, 2, 2, 1, 2));
  const json& t = plan["parallel"]["tensors"];
  // tp fastest, then dp: dp1.tp0 is rank 2.
  ASSERT_TRUE(t.contains("dp1.tp0.pp0.mb1.l0.act"));
  EXPECT_EQ(t["dp1.tp0.pp0.mb1.l0.act"]["rank"], 2);
  EXPECT_EQ(t["dp1.tp0.pp0.mb1.l0.act"]["of"]["slice"], json({{6, 8}, {0, 4}}));
  EXPECT_EQ(t["dp0.tp1.pp0.mb0.l1.pre.part"]["of"]["part"], json({1, 2}));
  EXPECT_EQ(t["dp1.tp1.pp0.mb1.grad.w0"]["of"]["part"], json({3, 4}));
  EXPECT_EQ(t["dp1.tp1.pp0.grad.w0.local"]["of"]["part"], json({1, 2}));
  bool found = false;
  for (const json& op : plan["parallel"]["ops"])
    if (op["name"] == "dp0.tp0.pp0.mb0.loss.fwd.scale") {
      EXPECT_EQ(op["attrs"]["factor"], "1/64");
      found = true;
    }
  EXPECT_TRUE(found);
}

// Each bug changes the parallel graph only, stays valid, and says in meta
// which logical tensor it breaks; for the reference shape (4 layers) that is
// the catalogue's first_tensor_hint.
TEST(Planner, EveryBugChangesOnlyTheParallelGraphAndStaysValid) {
  for (const planner::BugInfo& bug : planner::list_bugs("mlp"))
    for (const PlanConfig& base : {config(4, 2, 2, 2, 2), config(4, 2, 4, 4, 2, "adam")}) {
      PlanConfig c = base;
      c.bug = bug.name;
      SCOPED_TRACE(describe(c));
      json correct = planner::generate_plan("mlp", base);
      json buggy = planner::generate_plan("mlp", c);
      EXPECT_EQ(correct["logical"], buggy["logical"]);
      EXPECT_NE(correct["parallel"], buggy["parallel"]);
      EXPECT_EQ(buggy["meta"]["bug"], bug.name);
      EXPECT_EQ(buggy["meta"]["bug_first_tensor"], bug.first_tensor_hint);
      EXPECT_EQ(planner::bug_first_tensor("mlp", c), bug.first_tensor_hint);
      check_structure(buggy, c);
      EXPECT_EQ(parse_error(buggy), "");
    }
}

TEST(Planner, PipelineBugNamesTheBoundaryItCorrupts) {
  // Two layers over two stages: the only boundary is after layer 0.
  EXPECT_EQ(planner::bug_first_tensor("mlp", config(2, 1, 1, 2, 1, "sgd", "pp-send-wrong-tensor")),
            "l0.act");
  EXPECT_THROW(planner::bug_first_tensor("mlp", config(2, 1, 1, 2, 1)), std::invalid_argument);
}

void expect_rejected(const PlanConfig& c, const std::string& words) {
  try {
    planner::generate_plan("mlp", c);
    ADD_FAILURE() << describe(c) << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
        << describe(c) << ": " << e.what();
  }
}

TEST(Planner, RejectsConfigsThatDoNotFit) {
  expect_rejected(config(4, 1, 3, 1, 1), "tp (3) must divide hidden (8)");
  expect_rejected(config(4, 4, 1, 1, 4), "dp * microbatches (4 * 4) must divide batch (8)");
  expect_rejected(config(2, 1, 1, 4, 1), "pp (4) must be <= layers (2)");
  expect_rejected(config(-1, 1, 1, 1, 1), "layers must be >= 1");
  expect_rejected(config(2, 0, 1, 1, 1), "dp must be >= 1");
  expect_rejected(config(2, 1, 1, 1, 1, "lamb"), "optimizer must be 'sgd' or 'adam'");
  PlanConfig big = config(2, 1, 16, 1, 1);
  big.hidden = 8;
  expect_rejected(big, "must divide hidden");
  EXPECT_THROW(planner::generate_plan("resnet", config(2, 1, 1, 1, 1)), std::invalid_argument);
}

TEST(Planner, RejectsUnknownAndInapplicableBugs) {
  expect_rejected(config(2, 1, 1, 1, 1, "sgd", "off-by-one"),
                  "unknown bug 'off-by-one' (known bugs: drop-tp-allreduce,");
  expect_rejected(config(2, 1, 1, 1, 1, "sgd", "drop-tp-allreduce"), "needs tp >= 2");
  expect_rejected(config(2, 1, 2, 1, 1, "sgd", "dp-grad-not-synced"), "needs dp >= 2");
  expect_rejected(config(2, 2, 2, 1, 1, "sgd", "pp-send-wrong-tensor"), "needs pp >= 2");
  expect_rejected(config(4, 2, 2, 2, 1, "sgd", "loss-scale-wrong-microbatch-count"),
                  "needs microbatches >= 2");
  expect_rejected(config(2, 1, 2, 1, 1, "sgd", "tp-input-grad-not-reduced"), "layers >= 3");
}

// --- the llama3 family

// --list-bugs says what each bug needs, and that is exactly why the family's
// default configuration refuses it: a bug listed as needing nothing
// generates there, every other is refused naming its need.
TEST(Planner, CatalogueListsWhatEachBugNeeds) {
  for (const char* model : {"mlp", "llama3-tiny", "moe-tiny"})
    for (const planner::BugInfo& b : planner::list_bugs(model)) {
      PlanConfig c;
      c.bug = b.name;
      if (b.needs.empty()) {
        EXPECT_NO_THROW(planner::bug_first_tensor(model, c)) << model << " " << b.name;
        continue;
      }
      try {
        planner::bug_first_tensor(model, c);
        ADD_FAILURE() << model << " " << b.name << " applies to the default configuration";
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(b.needs), std::string::npos)
            << model << " " << b.name << ": " << e.what();
      }
    }
  std::map<std::string, std::string> needs;
  for (const planner::BugInfo& b : planner::list_bugs("llama3-tiny")) needs[b.name] = b.needs;
  EXPECT_EQ(needs["clip-norm-missing-pp"], "--clip and pp >= 2");
  EXPECT_EQ(needs["sp-grad-on-dp-group"], "sp and dp * cp == tp");
  EXPECT_EQ(needs["zero3-grad-double-reduced"], "zero 3");
  EXPECT_EQ(needs["row-parallel-no-allreduce"], "tp >= 2");
}

PlanConfig llama(int layers, int dp, int tp, int pp, int mb) {
  return testing::transformer_config(layers, dp, tp, pp, mb);
}

TEST(Planner, LlamaCatalogueHasTwentyDescribedBugs) {
  std::vector<planner::BugInfo> bugs = planner::list_bugs("llama3-8b");
  EXPECT_GE(bugs.size(), 20u);
  std::set<std::string> names;
  for (const planner::BugInfo& b : bugs) {
    EXPECT_TRUE(names.insert(b.name).second) << "duplicate " << b.name;
    EXPECT_FALSE(b.description.empty()) << b.name;
    EXPECT_FALSE(b.real_world.empty()) << b.name;
  }
}

// One logical graph serves every parallel plan of a model: it depends on the
// model (and tied embeddings, which change the model), never on the degrees.
TEST(Planner, LlamaLogicalGraphIgnoresParallelDegrees) {
  PlanConfig base = llama(4, 1, 1, 1, 1);
  base.batch = 4;
  json reference = planner::generate_plan("llama3-tiny", base)["logical"];
  PlanConfig a = llama(4, 2, 2, 2, 2), b = llama(4, 1, 4, 1, 1);
  a.batch = b.batch = 4;
  b.sp = true;
  b.cp = 2;
  EXPECT_EQ(planner::generate_plan("llama3-tiny", a)["logical"], reference);
  EXPECT_EQ(planner::generate_plan("llama3-tiny", b)["logical"], reference);
}

TEST(Planner, LlamaUsesPublishedShapes) {
  json meta = planner::generate_plan("llama3-8b", llama(1, 1, 1, 1, 1))["meta"];
  EXPECT_EQ(meta["hidden"], 4096);
  EXPECT_EQ(meta["heads"], 32);
  EXPECT_EQ(meta["kv_heads"], 8);
  EXPECT_EQ(meta["ffn"], 14336);
  EXPECT_EQ(meta["vocab"], 128256);
  // tp 3 divides neither 64 heads nor 8 kv heads.
  EXPECT_THROW(planner::generate_plan("llama3-70b",
                                      [] {
                                        PlanConfig c;
                                        c.tp = 3;
                                        return c;
                                      }()),
               std::invalid_argument);
}

TEST(Planner, LlamaRejectsConfigsThatDoNotFit) {
  auto rejected = [](PlanConfig c, const std::string& why) {
    try {
      planner::generate_plan("llama3-tiny", c);
      ADD_FAILURE() << "accepted; expected: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  rejected(llama(2, 1, 3, 1, 1), "tp (3) must divide the heads (4)");
  PlanConfig sp = llama(2, 1, 1, 1, 1);
  sp.sp = true;
  rejected(sp, "sp (sequence parallelism) needs tp >= 2");
  PlanConfig zero = llama(2, 1, 1, 1, 1);
  zero.zero = 1;
  rejected(zero, "zero needs dp * cp >= 2");
  PlanConfig cp = llama(2, 1, 1, 1, 1);
  cp.cp = 3;
  rejected(cp, "must divide the sequence length (8)");
  rejected(llama(2, 1, 1, 4, 1), "pp (4) must be <= layers (2)");
  PlanConfig hidden = llama(2, 1, 1, 1, 1);
  hidden.hidden = 32;
  rejected(hidden, "--hidden is fixed by the model");
  PlanConfig bug = llama(2, 1, 1, 1, 1);
  bug.bug = "row-parallel-no-allreduce";
  rejected(bug, "needs tp >= 2");
}

}  // namespace
}  // namespace shardproof
