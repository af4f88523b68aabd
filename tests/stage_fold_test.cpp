// Folded pipeline stages (planner/stage_fold.h) and the layer shift the
// class verifier checks for them (engine/classes/layer_shift.h,
// docs/soundness.md 2.2, "Pipeline stages as one class"): the middle stages
// of a deep model are one program affine in pp, explored at the ends of
// their run only; a wrong shard in one interior layer, and a logical layer
// that differs from its neighbours inside the run, are still found.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "engine/classes/class_verifier.h"
#include "engine/classes/layer_shift.h"
#include "planner/planner.h"
#include "planner/stage_fold.h"
#include "tests/compact_support.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::by_classes;
using testing::mentions;

// llama3-tiny, 24 layers on 12 pipeline stages of 2 (dp2 tp2, 2
// micro-batches): stages 1..10 fold; the run the verifier keeps whole is
// 3..8 (the stages within a send of its ends are classes of their own).
planner::PlanConfig deep(bool fold = true) {
  planner::PlanConfig c = testing::transformer_config(24, 2, 2, 12, 2);
  c.compact = true;
  c.fold_stages = fold;
  return c;
}

json& folded_program(json& plan) {
  for (json& p : plan["parallel"]["programs"])
    if (p.value("on", "") == "pp >= 1 && pp <= 10") return p;
  ADD_FAILURE() << "no folded program";
  static json none;
  return none;
}

TEST(StageFold, TheMiddleStagesBecomeOneProgramAffineInPp) {
  json folded = planner::generate_plan("llama3-tiny", deep());
  json unfolded = planner::generate_plan("llama3-tiny", deep(false));
  EXPECT_EQ(unfolded["parallel"]["programs"].size(), 12u);
  ASSERT_EQ(folded["parallel"]["programs"].size(), 3u);
  const json& p = folded_program(folded);
  bool affine_layer = false;
  for (const json& t : p["tensors"])
    affine_layer |= t["name"] == "dp{dp}.tp{tp}.pp{pp}.l{2*pp + 1}.wq";
  EXPECT_TRUE(affine_layer) << p["tensors"][0].dump();
  // Both write the same plan (the expansion, compared by name).
  planner::PlanConfig v1 = deep();
  v1.compact = false;
  testing::expect_same_plan("llama3-tiny", v1);
}

// Three stage programs; `edit` changes stage 2's.
json three_stages(const std::function<void(json&)>& edit) {
  json stages = json::array();
  for (int k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k), l = std::to_string(2 * k);
    stages.push_back(
        {{"name", "stage" + n},
         {"on", "pp == " + n},
         {"tensors",
          {{{"name", "dp{dp}.pp" + n + ".l" + l + ".w"},
            {"shape", {4, 4}},
            {"dtype", "f32"},
            {"input", true},
            {"of", {{"tensor", "l" + l + ".w"}, {"slice", {{"dp*2", "dp*2 + 2"}, {0, 4}}}}}}}},
         {"ops", json::array()}});
  }
  edit(stages[2]);
  return {{"mesh", {{"axes", {{"pp", 3}, {"dp", 2}}}, {"mb", 1}}}, {"programs", stages}};
}

TEST(StageFold, OnlyStagesThatDifferByAffineNumbersFold) {
  json same = planner::fold_pipeline_stages(three_stages([](json&) {}));
  ASSERT_EQ(same["programs"].size(), 1u) << same.dump();
  EXPECT_EQ(same["programs"][0]["on"], "pp >= 0 && pp <= 2");
  EXPECT_EQ(same["programs"][0]["tensors"][0]["name"], "dp{dp}.pp{pp}.l{2*pp}.w");
  EXPECT_EQ(same["programs"][0]["tensors"][0]["of"]["tensor"], "l{2*pp}.w");
  // A shape, a number off the line of the others, a number multiplied by an
  // axis: each keeps the stages apart.
  for (auto edit : std::vector<std::function<void(json&)>>{
           [](json& p) {
             p["tensors"][0]["shape"] = {4, 8};
           },
           [](json& p) { p["tensors"][0]["of"]["tensor"] = "l5.w"; },
           [](json& p) {
             p["tensors"][0]["of"]["slice"][0] = {"dp*3", "dp*3 + 2"};
           }}) {
    json apart = planner::fold_pipeline_stages(three_stages(edit));
    EXPECT_EQ(apart["programs"].size(), 3u) << apart.dump();
  }
}

TEST(StageFold, ShiftedNamesMoveEachNumber) {
  using compact::shifted_name;
  EXPECT_EQ(shifted_name("l13.x2", {8, 0}), std::optional<std::string>("l21.x2"));
  EXPECT_EQ(shifted_name("grad.l9", {-2}), std::optional<std::string>("grad.l7"));
  EXPECT_EQ(shifted_name("l1", {-2}), std::nullopt);     // no negative numbers
  EXPECT_EQ(shifted_name("l013", {1}), std::nullopt);    // not plain decimal
  EXPECT_EQ(shifted_name("l13.x2", {8}), std::nullopt);  // a number per shift
}

TEST(ClassVerifierFold, AFoldedDeepLlamaIsEquivalentInFewerBatches) {
  ClassRunCounts counts;
  Report r = by_classes(planner::generate_plan("llama3-tiny", deep()), &counts);
  ASSERT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  // 0, 1, 2, 3 and 8, 9, 10, 11: the interior stages 4..7 are not explored.
  EXPECT_EQ(counts.batches, 8);
}

// Every tp rank of layer 13 (pipeline stage 6, inside the run 3..8) loads
// the other rank's half of its wq: the folded template is split at pp == 6
// (the halves still cover the weight, so the plan is valid). Found, there.
TEST(ClassVerifierFold, AWrongShardInOneInteriorLayerOfTheRunIsFound) {
  json plan = planner::generate_plan("llama3-tiny", deep());
  json& tensors = folded_program(plan)["tensors"];
  bool changed = false;
  for (size_t i = 0; i < tensors.size() && !changed; ++i) {
    if (tensors[i]["name"] != "dp{dp}.tp{tp}.pp{pp}.l{2*pp + 1}.wq") continue;
    ASSERT_EQ(tensors[i]["of"]["slice"][1][0], "tp*8") << tensors[i].dump();
    json wrong = tensors[i], before = tensors[i], after = tensors[i];
    wrong["when"] = "pp == 6";
    wrong["of"]["slice"][1] = {"(1 - tp)*8", "(1 - tp)*8 + 8"};
    before["when"] = "pp <= 5";
    after["when"] = "pp >= 7";
    tensors[i] = wrong;
    tensors.insert(tensors.begin() + static_cast<std::ptrdiff_t>(i) + 1, before);
    tensors.insert(tensors.begin() + static_cast<std::ptrdiff_t>(i) + 2, after);
    changed = true;
  }
  ASSERT_TRUE(changed);
  Report r = by_classes(plan);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(mentions(r, "l13.")) << testing::explain(r);
  for (const char* other : {"l11.", "l15."})
    EXPECT_FALSE(mentions(r, other)) << other << "\n" << testing::explain(r);
}

// The logical graph of layer 13 (inside the run) adds another epsilon in
// its attention norm than its neighbours; the parallel program, one for
// every stage of the run, computes what the others do. The corners' stages
// (layers 6, 7 and 16, 17) are right, so only the check that the run's
// logical layers are shifts of each other can find it: it fails, the run is
// verified stage by stage, and layer 13 is found.
TEST(ClassVerifierFold, ALogicalLayerThatDiffersInsideTheRunIsFound) {
  json plan = planner::generate_plan("llama3-tiny", deep());
  bool changed = false;
  for (json& op : plan["logical"]["ops"])
    if (op["name"] == "l13.an.eps.const") {
      op["attrs"]["value"] = "1/1000";
      changed = true;
    }
  ASSERT_TRUE(changed);
  Report r = by_classes(plan);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(mentions(r, "l13.")) << testing::explain(r);
}

// The catalogue's bugs at one pipeline boundary, one micro-batch and one
// rank class, written with the stages folded (a bug confined to one stage
// keeps it out of the run; one on every stage folds with it).
TEST(ClassVerifierFold, TheDepthBugsAreFoundInFoldedPlans) {
  for (const char* bug :
       {"pp-send-wrong-tensor", "pp-send-wrong-microbatch", "allreduce-mean-not-sum"}) {
    planner::PlanConfig c = deep();
    c.bug = bug;
    Report r = by_classes(planner::generate_plan("llama3-tiny", c));
    ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << bug << "\n" << testing::explain(r);
    const std::string first = planner::bug_first_tensor("llama3-tiny", c);
    EXPECT_TRUE(mentions(r, first)) << bug << " not found at " << first << "\n"
                                    << testing::explain(r);
  }
}

}  // namespace
}  // namespace shardproof
