// Distinct stages that reduce to one stage share a verdict key: the engine
// decides one of them (the leader) and the others follow it, with findings
// in their own names and full-size elements.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "engine/verifier.h"
#include "tests/family_plans.h"
#include "tests/graph_text.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using family_plans::scaled_sixths;
using nlohmann::json;

Report verify_counting(const json& plan, int& proofs) {
  std::atomic<int> calls{0};
  VerifyOptions options;
  options.executor = [&](const std::function<StageOutcome()>& prove) {
    ++calls;
    return prove();
  };
  Report r = verify_plan(testing::parse(plan), options);
  proofs = calls;
  return r;
}

TEST(VerdictLeader, StagesAlikeButForWhereTheySitAreProvenOnce) {
  int proofs = 0;
  Report r = verify_counting(scaled_sixths(4, 3), proofs);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_EQ(r.stats.stages, 6);
  EXPECT_EQ(r.stats.unique_stages, 6) << "full positions differ, so do stage keys";
  EXPECT_EQ(proofs, 3);
  // The verdict line: 3 decided, 3 symmetric (their leaders' proofs).
  EXPECT_EQ(r.stats.symmetric, 3) << report_headline(r);
  EXPECT_EQ(decided_total(r.stats), r.stats.unique_stages) << report_headline(r);
}

// A refuted stage's findings name full-size elements: its followers are
// solved on their own and name theirs.
TEST(VerdictLeader, FollowersOfARefutedLeaderNameTheirOwnElements) {
  int proofs = 0;
  Report r = verify_counting(scaled_sixths(4, 2), proofs);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(proofs, 6);
  EXPECT_EQ(r.stats.symmetric, 0) << report_headline(r);
  EXPECT_EQ(decided_total(r.stats), r.stats.unique_stages) << report_headline(r);
  ASSERT_EQ(r.findings.size(), 6u) << testing::explain(r);
  std::set<std::string> named;
  for (const Finding& f : r.findings) {
    ASSERT_EQ(f.parallel_tensors.size(), 1u);
    named.insert(f.parallel_tensors[0]);
    const int rank = f.parallel_tensors[0][1] - '0';
    ASSERT_FALSE(f.elements.empty());
    for (const std::vector<int64_t>& e : f.elements) {
      EXPECT_GE(e[0], 4 * rank) << f.message;
      EXPECT_LT(e[0], 4 * rank + 4) << f.message;
    }
  }
  EXPECT_EQ(named, (std::set<std::string>{"r0.y", "r1.y", "r2.y", "r3.y", "r4.y", "r5.y"}));
}

// A stage that differs in what it computes is not a follower.
TEST(VerdictLeader, ADifferentStageIsDecidedOnItsOwn) {
  json plan = scaled_sixths(4, 3);
  plan["parallel"]["ops"][2]["attrs"]["factor"] = 2;
  int proofs = 0;
  Report r = verify_counting(plan, proofs);
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_EQ(proofs, 4);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].parallel_tensors, std::vector<std::string>{"r2.y"});
}

}  // namespace
}  // namespace shardproof
