// The full-size checks of docs/soundness.md, section 5.1, on the one blind
// spot section 3.2 admits (section 7): a tensor and a recomputation of it
// cancel, x - neg(neg(x)) = 0, so exp of it is exp(0) at every element and
// its sum counts the piece while the rules see a varying value. The stages
// are small, so both checks run at full size.
#include <gtest/gtest.h>

#include "tests/family_plans.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::explain;
using testing::verify_json;
using namespace family_plans;

// The bug (2 for 8) is proven at pieces of 2; random values at full size
// refute it, so the stage is unknown with a loud diagnostic, never
// equivalent.
TEST(FullSizeCheck, TheBackstopCatchesAReductionTheRulesMiss) {
  Report r = verify_json(recomputed_cancel(8, 2), "backstop");
  ASSERT_EQ(r.verdict, Verdict::Unknown) << explain(r);
  EXPECT_NE(explain(r).find("SOUNDNESS:"), std::string::npos) << explain(r);
}

// The correct count (8) is refuted at pieces of 2 by a difference that
// exists only there: no full-size witness, so the full stage is proven
// again and the plan is equivalent, not a false alarm.
TEST(FullSizeCheck, AReducedOnlyCounterexampleIsWithdrawn) {
  Report r = verify_json(recomputed_cancel(8, 8), "witness");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << explain(r);
}

}  // namespace
}  // namespace shardproof
