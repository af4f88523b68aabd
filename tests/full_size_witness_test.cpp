// Findings need a full-size witness, for stages too large to test whole
// (docs/soundness.md, section 5.1): a refutation at reduced size is replayed
// at full size on the sub-stage its failing elements need. The plans are
// those of full_size_check_test.cpp with 4096 rows (the blind spot of
// section 7: exp(x - neg(neg(x))) is exp(0) at every element, so its sum
// counts the piece), far over the 20,000 elements tested whole.
#include <gtest/gtest.h>

#include "engine/prove/full_size_witness.h"
#include "engine/stage/narrowed_stage.h"
#include "planner/planner.h"
#include "tests/family_plans.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::explain;
using testing::verify_json;
using namespace family_plans;

constexpr int64_t kRows = 4096, kCols = 8;

// Per row, the sum over 8 columns of exp(x - neg(neg(x))); the parallel
// side writes exp(0) times `count` for every row.
json rows_of_recomputed_cancel(int count) {
  auto rc = json::array({kRows, kCols});
  json lt = {{"x", tensor(rc)}, {"n", tensor(rc)}, {"nn", tensor(rc)},
             {"d", tensor(rc)}, {"e", tensor(rc)}, {"y", tensor({kRows})}};
  json lops = {op("n", "neg", {"x"}, {"n"}), op("nn", "neg", {"n"}, {"nn"}),
               op("d", "sub", {"x", "nn"}, {"d"}), op("e", "exp", {"d"}, {"e"}),
               op("y", "sum", {"e"}, {"y"}, {{"dims", {1}}})};
  json pt = {{"p.z", ptensor({kRows})},
             {"p.k", ptensor({kRows})},
             {"p.y", ptensor({kRows}, {{"tensor", "y"}})}};
  json pops = {constant("p.z", 0, {kRows}), op("p.k", "exp", {"p.z"}, {"p.k"}),
               op("p.y", "scale", {"p.k"}, {"p.y"}, {{"factor", count}})};
  return one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"});
}

// A real bug (7 for 8) is refuted at pieces of 2 and replayed at full size
// on the row it names: not equivalent, with the full-size witness.
TEST(FullSizeWitness, ARealBugInALargeStageHasAFullSizeWitness) {
  Report r = verify_json(rows_of_recomputed_cancel(7), "witness-bug");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(explain(r).find("replayed at full size"), std::string::npos) << explain(r);
}

// The correct count (8) is refuted at pieces of 2 and of 3 by differences
// that exist only there: no full-size witness, so never not equivalent.
// (Before, the reduced refutation was reported, "not replayed at full size".)
TEST(FullSizeWitness, AReducedOnlyCounterexampleInALargeStageIsNoFinding) {
  Report r = verify_json(rows_of_recomputed_cancel(8), "witness-artefact");
  EXPECT_NE(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(r.verdict, Verdict::Equivalent) << explain(r);
  EXPECT_NE(explain(r).find("does not hold at full size"), std::string::npos) << explain(r);
}

// A generated plan at a long sequence: the MLP down projection's partial
// sums averaged over tp, in a stage of 327,680 elements. The finding is
// replayed at full size on the few elements its first row needs.
TEST(FullSizeWitness, AGeneratedBugAtALongSequenceHasAFullSizeWitness) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 2, 1, 1);
  c.seq = 4096;
  c.bug = "allreduce-mean-not-sum";
  Report r = verify_json(planner::generate_plan("llama3-tiny", c), "witness-llama");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(explain(r).find("replayed at full size"), std::string::npos) << explain(r);
}

// Per row, the sum of the first 3 of 8 columns (a split); the parallel side
// sums the other 5. At 2^19 rows, x alone is 4,194,304 elements: a whole
// split would read all of it, over what a sub-stage may hold (4,000,000),
// and the finding was unknown; the split narrowed to the row holds 8.
TEST(FullSizeWitness, ABugBehindASplitInALargeStageHasAFullSizeWitness) {
  constexpr int64_t rows = int64_t{1} << 19;
  auto rc = json::array({rows, 8});
  json lt = {
      {"x", tensor(rc)}, {"a", tensor({rows, 3})}, {"b", tensor({rows, 5})}, {"y", tensor({rows})}};
  json lops = {op("a", "split", {"x"}, {"a", "b"}, {{"dim", 1}, {"sizes", {3, 5}}}),
               op("y", "sum", {"a"}, {"y"}, {{"dims", {1}}})};
  json pt = {{"p.a", ptensor({rows, 3})},
             {"p.b", ptensor({rows, 5})},
             {"p.y", ptensor({rows}, {{"tensor", "y"}})}};
  json pops = {op("p.a", "split", {"p.x"}, {"p.a", "p.b"}, {{"dim", 1}, {"sizes", {3, 5}}}),
               op("p.y", "sum", {"p.b"}, {"p.y"}, {{"dims", {1}}})};
  Report r = verify_json(one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"}),
                         "witness-split");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(explain(r).find("replayed at full size"), std::string::npos) << explain(r);
}

// Per row, the maximum of 8192 columns; the parallel side takes the maximum
// of the first 4096 only (a vocabulary shard's local maximum where the
// all-reduced one is due). Random values at full size almost never show it:
// among 4096 draws of n/d (|n| <= 5) both halves hold the largest value, 5.
// The reduced counterexample (the second half's piece holding the larger
// value) lifted to full size, each piece repeating its kept elements, does.
// Before the lift, random values found no witness and it was unknown.
TEST(FullSizeWitness, ABugRandomValuesMissIsFoundByTheLiftedCounterexample) {
  constexpr int64_t rows = 4, cols = 8192;
  auto rc = json::array({rows, cols});
  json lt = {{"x", tensor(rc)}, {"y", tensor({rows})}};
  json lops = {op("y", "max", {"x"}, {"y"}, {{"dims", {1}}})};
  json pt = {{"p.a", ptensor({rows, cols / 2})},
             {"p.b", ptensor({rows, cols / 2})},
             {"p.y", ptensor({rows}, {{"tensor", "y"}})}};
  json pops = {
      op("p.a", "split", {"p.x"}, {"p.a", "p.b"}, {{"dim", 1}, {"sizes", {cols / 2, cols / 2}}}),
      op("p.y", "max", {"p.a"}, {"p.y"}, {{"dims", {1}}})};
  Report r = verify_json(one_rank(lt, {"x"}, lops, {"y"}, pt, {{"p.x", "x"}}, pops, {"p.y"}),
                         "witness-lifted");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << explain(r);
  EXPECT_NE(explain(r).find("lifted to full size"), std::string::npos) << explain(r);
}

}  // namespace
}  // namespace shardproof
