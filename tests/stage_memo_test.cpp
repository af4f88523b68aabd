// The stage identity memo (engine/stage/stage_memo.h): a stage keyed by its
// unreduced form must get exactly the identity its own reduction gives, and
// a re-verification through the memo must give the same answers.
#include <gtest/gtest.h>

#include <map>

#include "engine/format/plan_parser.h"
#include "engine/report/report_codec.h"
#include "engine/stage/canonical.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_memo.h"
#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/map_store.h"

namespace shardproof {
namespace {

Plan parse(const nlohmann::json& plan) {
  ParseResult parsed = parse_plan_text(plan.dump(), "memo-test.json", "");
  if (!parsed.plan) throw std::runtime_error("the generated plan does not parse");
  return std::move(*parsed.plan);
}

Plan llama(const std::string& bug = "", int pp = 1) {
  planner::PlanConfig c;
  c.layers = 2;
  c.dp = 2;
  c.tp = 2;
  c.pp = pp;
  c.microbatches = 2;
  c.bug = bug;
  return parse(planner::generate_plan("llama3-tiny", c));
}

using testing::MapStore;

nlohmann::json answer(Report r) {
  r.stats = {};
  return report_to_json(r);
}

// The memo's premise: reduction is a function of the unreduced canonical
// bytes. Every pair of stages sharing a raw key must reduce to one identity.
TEST(StageMemo, StagesWithOneRawKeyReduceToOneIdentity) {
  for (const Plan& plan : {llama("row-parallel-no-allreduce", 2)}) {
    std::vector<Stage> stages = build_stages(plan);
    std::map<RawStageKey, StageIdentity> seen;
    size_t shared = 0;
    for (Stage& s : stages) {
      const RawStageKey raw = raw_stage_key(s);
      reduce_stage(s);
      const StageIdentity id = stage_identity(s);
      auto [it, fresh] = seen.emplace(raw, id);
      if (fresh) continue;
      ++shared;
      EXPECT_EQ(it->second.key, id.key) << "stage " << s.id << ": " << s.title;
      EXPECT_EQ(it->second.digest, id.digest) << "stage " << s.id << ": " << s.title;
    }
    EXPECT_GT(shared, stages.size() / 2) << "identical layers should share raw keys";
  }
}

TEST(StageMemo, RawKeyCoversAttributesAndShapes) {
  Plan plan = llama();
  std::vector<Stage> stages = build_stages(plan);
  ASSERT_FALSE(stages.empty());
  size_t with_attrs = 0;
  for (const Stage& s : stages) {
    for (size_t o = 0; o < s.ops.size(); ++o) {
      if (s.ops[o].attrs.empty()) continue;
      Stage changed = s;
      auto& [name, value] = *changed.ops[o].attrs.begin();
      value = Attr::of_string(value.describe() + "x");
      EXPECT_NE(raw_stage_key(changed), raw_stage_key(s)) << s.title << " attr " << name;
      ++with_attrs;
      break;
    }
    Stage resized = s;
    resized.tensors[resized.target].full_shape.back() += 1;
    EXPECT_NE(raw_stage_key(resized), raw_stage_key(s)) << s.title;
    Stage renamed = s;
    for (StageTensor& t : renamed.tensors) t.name += "_renamed";
    EXPECT_EQ(raw_stage_key(renamed), raw_stage_key(s)) << "names are not content";
    if (with_attrs > 20) break;
  }
  EXPECT_GT(with_attrs, 0u);
}

// A daemon keeps one memo and one store across requests: the second run
// keys every stage from the memo and decides it from the store, and still
// renders the same findings in the same names.
TEST(StageMemo, ReverificationThroughMemoAndStoreGivesTheSameAnswer) {
  for (const std::string& bug : {std::string(), std::string("row-parallel-no-allreduce"),
                                 std::string("pp-send-wrong-microbatch")}) {
    Plan plan = llama(bug, bug.rfind("pp-", 0) == 0 ? 2 : 1);
    StageIdentityMemo memo;
    MapStore store;
    VerifyOptions options;
    options.jobs = 2;
    options.identity_memo = &memo;
    options.store = &store;
    Report first = verify_plan(plan, options);
    const size_t remembered = memo.size();
    EXPECT_GT(remembered, 0u);
    Report second = verify_plan(plan, options);
    EXPECT_EQ(memo.size(), remembered) << "the second run reduces nothing new";
    EXPECT_EQ(second.stats.solved, 0) << bug;
    EXPECT_EQ(answer(first), answer(second)) << bug;
    // And both agree with a run that shares nothing.
    VerifyOptions fresh;
    fresh.jobs = 2;
    EXPECT_EQ(answer(first), answer(verify_plan(plan, fresh))) << bug;
    EXPECT_EQ(first.verdict, bug.empty() ? Verdict::Equivalent : Verdict::NotEquivalent) << bug;
  }
}

}  // namespace
}  // namespace shardproof
