// Proof keys (docs/soundness.md, "One proof per reduced query"): a stage
// whose verdict was never stored takes the proof of the same reduced query
// that another stage's solve stored (the same layer at another mesh), and
// its own full-size backstop runs again. The traps: a full size an op reads
// (a mean's count) keeps the proofs apart, the backstop still doubts a
// shared proof, refutations are never shared, and a bug at another mesh is
// found after the correct plan's proofs were stored.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/ops/full_sizes.h"
#include "engine/ops/op_helpers.h"
#include "engine/stage/canonical.h"
#include "engine/stage/proof_identity.h"
#include "engine/stage/shape_reduction.h"
#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/family_plans.h"
#include "tests/graph_text.h"
#include "tests/map_store.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::explain;
using testing::MapStore;
using namespace family_plans;

// A MapStore that counts what it holds and gives under proof keys (a
// proof's identity has no verdict key: proof_identity.h).
class ProofStore : public MapStore {
 public:
  std::optional<std::string> lookup(const StageIdentity& id) override {
    std::optional<std::string> got = MapStore::lookup(id);
    if (got && id.verdict.empty()) ++proofs_taken;
    return got;
  }
  void finish(const StageIdentity& id, const std::optional<std::string>& outcome,
              double seconds) override {
    if (outcome && id.verdict.empty()) ++proofs_kept;
    MapStore::finish(id, outcome, seconds);
  }
  std::atomic<int> proofs_taken{0}, proofs_kept{0};
};

// Verifies through `store`, counting the stages sent to the prover.
Report verify_through(const json& plan, StageVerdictStore& store, int* proofs = nullptr) {
  std::atomic<int> calls{0};
  VerifyOptions options;
  options.store = &store;
  options.executor = [&](const std::function<StageOutcome()>& prove) {
    ++calls;
    return prove();
  };
  Report r = verify_plan(testing::parse(plan), options);
  if (proofs) *proofs = calls;
  return r;
}

// The mean of x[cols] written as its sum scaled by `factor`: at 8 and 16
// columns the stage reduces to the same 2-column stage; only the count the
// mean divides by tells them apart.
json mean_as_scaled_sum(int64_t cols, const std::string& factor) {
  json lt = {{"x", tensor({cols})}, {"y", tensor(json::array())}};
  json lops = {op("mean", "mean", {"x"}, {"y"})};
  json pt = {{"p.s", ptensor(json::array())}, {"p.y", scalar_claim("y")}};
  json pops = {op("sum", "sum", {"p.x"}, {"p.s"}),
               op("scale", "scale", {"p.s"}, {"p.y"}, {{"factor", factor}})};
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

// The reduced stages of a plan.
std::vector<Stage> reduced_stages(const json& plan) {
  Plan p = testing::parse(plan);
  std::vector<Stage> stages = build_stages(p);
  for (Stage& s : stages) reduce_stage(s);
  return stages;
}

TEST(ProofKey, StagesThatReduceAlikeShareOneProof) {
  const std::vector<Stage> narrow = reduced_stages(scaled_sixths(4, 3));
  const std::vector<Stage> wide = reduced_stages(scaled_sixths(8, 3));
  ASSERT_EQ(narrow.size(), wide.size());
  for (size_t i = 0; i < narrow.size(); ++i) {
    EXPECT_NE(verdict_key(narrow[i]), verdict_key(wide[i])) << "full shapes differ";
    EXPECT_EQ(proof_key(narrow[i]), proof_key(wide[i])) << "the reduced queries are one";
  }

  ProofStore store;
  int proofs = 0;
  Report first = verify_through(scaled_sixths(4, 3), store, &proofs);
  ASSERT_EQ(first.verdict, Verdict::Equivalent) << explain(first);
  EXPECT_EQ(proofs, 3) << "three verdict keys (first, middle, last rank)";
  EXPECT_EQ(store.proofs_kept, 3);
  EXPECT_EQ(first.stats.shared_proofs, 0) << report_headline(first);

  Report second = verify_through(scaled_sixths(8, 3), store, &proofs);
  ASSERT_EQ(second.verdict, Verdict::Equivalent) << explain(second);
  EXPECT_EQ(proofs, 0) << report_headline(second);
  EXPECT_EQ(store.proofs_taken, 3);
  // Taken proofs are counted as shared, not as the stages' own cached verdicts.
  EXPECT_EQ(second.stats.shared_proofs, 3) << report_headline(second);
  EXPECT_EQ(second.stats.cached, 0) << report_headline(second);
  EXPECT_EQ(second.stats.symmetric, 3) << report_headline(second);
  EXPECT_NE(report_headline(second).find("3 shared proofs, 0 cached"), std::string::npos)
      << report_headline(second);
  EXPECT_EQ(decided_total(second.stats), second.stats.unique_stages) << report_headline(second);

  // Its own verdicts were stored: a third run takes them, not the proofs.
  Report third = verify_through(scaled_sixths(8, 3), store, &proofs);
  EXPECT_EQ(proofs, 0);
  EXPECT_EQ(store.proofs_taken, 3);
  EXPECT_EQ(third.stats.cached, 6) << report_headline(third);
  EXPECT_EQ(third.stats.shared_proofs, 0) << report_headline(third);
}

// A verification that decides its stages in rounds (claim inference after a
// withdrawn hint, the class verifier's refinements) keeps them in a store in
// memory: a later round that takes a stage a shared proof decided counts it
// as shared, as the first round did (it was counted as solved).
TEST(ProofKey, ALaterRoundStillCountsASharedProofAsShared) {
  ProofStore store;
  ASSERT_EQ(verify_through(scaled_sixths(4, 3), store).verdict, Verdict::Equivalent);
  MemoryVerdictStore rounds(&store);
  Report first = verify_through(scaled_sixths(8, 3), rounds);
  EXPECT_EQ(first.stats.shared_proofs, 3) << report_headline(first);
  int proofs = 0;
  Report second = verify_through(scaled_sixths(8, 3), rounds, &proofs);
  EXPECT_EQ(proofs, 0);
  EXPECT_EQ(second.stats.shared_proofs, 3) << report_headline(second);
  EXPECT_EQ(second.stats.cached, 0) << report_headline(second);
  EXPECT_EQ(decided_total(second.stats), second.stats.unique_stages) << report_headline(second);
}

TEST(ProofKey, AMeanOverAnotherLengthHasItsOwnProof) {
  const Stage eight = reduced_stages(mean_as_scaled_sum(8, "1/8")).at(0);
  const Stage sixteen = reduced_stages(mean_as_scaled_sum(16, "1/8")).at(0);
  ASSERT_EQ(eight.tensors[eight.target].shape, sixteen.tensors[sixteen.target].shape);
  EXPECT_NE(proof_key(eight), proof_key(sixteen)) << "the mean reads its full count";

  ProofStore store;
  Report right = verify_through(mean_as_scaled_sum(8, "1/8"), store);
  ASSERT_EQ(right.verdict, Verdict::Equivalent) << explain(right);
  ASSERT_EQ(store.proofs_kept, 1);
  Report wrong = verify_through(mean_as_scaled_sum(16, "1/8"), store);
  ASSERT_EQ(wrong.verdict, Verdict::NotEquivalent) << explain(wrong);
  EXPECT_EQ(store.proofs_taken, 0);
  EXPECT_EQ(wrong.findings.at(0).tensor, "y");
}

// The proof of the n = 2 query is right; the n = 8 stage reduces to it, and
// its own backstop (random values at its full size) doubts it: unknown with
// the SOUNDNESS diagnostic, as when it is solved, never equivalent.
TEST(ProofKey, TheBackstopRunsOnASharedProof) {
  ProofStore store;
  Report small = verify_through(recomputed_cancel(2, 2), store);
  ASSERT_EQ(small.verdict, Verdict::Equivalent) << explain(small);
  ASSERT_EQ(store.proofs_kept, 1);
  int proofs = 0;
  Report large = verify_through(recomputed_cancel(8, 2), store, &proofs);
  EXPECT_EQ(store.proofs_taken, 1) << report_headline(large);
  EXPECT_EQ(proofs, 0) << "the proof was shared, not solved again";
  ASSERT_EQ(large.verdict, Verdict::Unknown) << explain(large);
  EXPECT_NE(explain(large).find("SOUNDNESS:"), std::string::npos) << explain(large);
}

// A refuted stage's findings name its own full-size elements: nothing of a
// refutation is shared, and the wider plan is refuted at its own elements.
TEST(ProofKey, ARefutationIsNeverShared) {
  ProofStore store;
  Report narrow = verify_through(scaled_sixths(4, 2), store);
  ASSERT_EQ(narrow.verdict, Verdict::NotEquivalent) << explain(narrow);
  EXPECT_EQ(store.proofs_kept, 0);
  Report wide = verify_through(scaled_sixths(8, 2), store);
  ASSERT_EQ(wide.verdict, Verdict::NotEquivalent) << explain(wide);
  EXPECT_EQ(store.proofs_taken, 0);
  ASSERT_EQ(wide.findings.size(), 6u) << explain(wide);
  for (const Finding& f : wide.findings) {
    const int rank = f.parallel_tensors.at(0)[1] - '0';
    for (const std::vector<int64_t>& e : f.elements) {
      EXPECT_GE(e[0], 8 * rank) << f.message;
      EXPECT_LT(e[0], 8 * rank + 8) << f.message;
    }
  }
}

// A mesh change of a generated MLP (tp 2, then tp 4) through one store:
// the correct plan shares proofs, and a bug at tp 4 is still found where
// it first shows.
TEST(ProofKey, AMeshChangeSharesProofsAndABugIsStillFound) {
  const json tp2 = planner::generate_plan("mlp", testing::mlp_config(2, 1, 2, 1, 1));
  const json tp4 = planner::generate_plan("mlp", testing::mlp_config(2, 1, 4, 1, 1));
  ProofStore cold;
  int cold_proofs = 0;
  Report alone = verify_through(tp4, cold, &cold_proofs);
  ASSERT_EQ(alone.verdict, Verdict::Equivalent) << explain(alone);

  EXPECT_EQ(alone.stats.shared_proofs, 0) << report_headline(alone);

  ProofStore store;
  Report fresh = verify_through(tp2, store);
  ASSERT_EQ(fresh.verdict, Verdict::Equivalent);
  EXPECT_EQ(fresh.stats.shared_proofs, 0) << report_headline(fresh);
  int proofs = 0;
  Report changed = verify_through(tp4, store, &proofs);
  ASSERT_EQ(changed.verdict, Verdict::Equivalent) << explain(changed);
  EXPECT_GT(store.proofs_taken, 0) << report_headline(changed);
  EXPECT_EQ(changed.stats.shared_proofs, store.proofs_taken) << report_headline(changed);
  EXPECT_EQ(decided_total(changed.stats), changed.stats.unique_stages) << report_headline(changed);
  EXPECT_LT(proofs, cold_proofs) << report_headline(changed);

  planner::PlanConfig buggy = testing::mlp_config(2, 1, 4, 1, 1, "sgd", "drop-tp-allreduce");
  ProofStore after_correct;
  ASSERT_EQ(verify_through(tp2, after_correct).verdict, Verdict::Equivalent);
  Report bug = verify_through(planner::generate_plan("mlp", buggy), after_correct);
  ASSERT_EQ(bug.verdict, Verdict::NotEquivalent) << explain(bug);
  EXPECT_EQ(bug.findings.at(0).tensor, planner::bug_first_tensor("mlp", buggy)) << explain(bug);
}

// The evaluators pass only the full sizes an op declares reading, and
// reading another throws: a proof key can never miss a size a proof used.
TEST(ProofKey, OpsReadOnlyTheFullSizesTheyDeclare) {
  AttrMap dims;
  dims["dims"] = Attr::of_int_list({1});
  EXPECT_EQ(declared_full_shapes("mean", dims, {{4, 8}}),
            (std::vector<Shape>{{kUnreadFullSize, 8}}));
  EXPECT_EQ(declared_full_shapes("sum", dims, {{4, 8}}),
            (std::vector<Shape>{{kUnreadFullSize, kUnreadFullSize}}));
  AttrMap eps;
  eps["eps"] = Attr::of_number(Rational(1, 100000));
  EXPECT_EQ(declared_full_shapes("layernorm", eps, {{4, 8}, {8}, {8}}),
            (std::vector<Shape>{{kUnreadFullSize, 8}, {kUnreadFullSize}, {kUnreadFullSize}}));

  OpCall call;
  call.op = "mean";
  call.full_in_shapes = {{kUnreadFullSize, 8}};
  EXPECT_EQ(ops::full_count(call, 0, {false, true}), 8);
  EXPECT_THROW(ops::full_count(call, 0, {true, false}), std::logic_error);
}

}  // namespace
}  // namespace shardproof
