// Pipeline schedules (engine/schedule): deadlock freedom and matched
// send/recv pairs over the per-rank order of point-to-point operations, the
// planner's 1F1B schedules (deadlock-free for every pp and micro-batch
// count tried, interleaved too), and its schedule bugs reported with their
// cycle.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/schedule/schedule_check.h"
#include "planner/planner.h"
#include "tests/planner_support.h"

namespace shardproof {
namespace {

using schedule::check_schedule;
using schedule::P2P;
using schedule::RankSchedule;
using Kind = schedule::ScheduleVerdict::Kind;

RankSchedule steps(std::vector<P2P> ops) {
  RankSchedule r;
  for (P2P& op : ops) r.push_back({std::move(op)});
  return r;
}

TEST(Schedule, MatchedPairsRunToTheEnd) {
  auto v = check_schedule(
      {steps({{true, 1, "a"}, {false, 1, "b"}}), steps({{false, 0, "a"}, {true, 0, "b"}})});
  EXPECT_EQ(v.kind, Kind::Ok) << v.message;
}

TEST(Schedule, TwoRanksThatBothSendFirstDeadlockWithTheirCycle) {
  auto v = check_schedule(
      {steps({{true, 1, "a"}, {false, 1, "b"}}), steps({{true, 0, "b"}, {false, 0, "a"}})});
  EXPECT_EQ(v.kind, Kind::Deadlock);
  EXPECT_EQ(v.cycle, (std::vector<int>{0, 1}));
  EXPECT_NE(v.message.find("rank 0 step 0: send a to 1"), std::string::npos) << v.message;
}

TEST(Schedule, OperationsPostedTogetherDoNotDeadlock) {
  // batch_isend_irecv: both sides post their send and receive at once.
  RankSchedule a = {{{true, 1, "a"}, {false, 1, "b"}}};
  RankSchedule b = {{{true, 0, "b"}, {false, 0, "a"}}};
  EXPECT_EQ(check_schedule({a, b}).kind, Kind::Ok);
}

TEST(Schedule, AReceiveOfAnotherTensorIsAMismatch) {
  auto v = check_schedule({steps({{true, 1, "x.mb1"}}), steps({{false, 0, "x.mb0"}})});
  EXPECT_EQ(v.kind, Kind::Mismatch);
  EXPECT_NE(v.message.find("x.mb0"), std::string::npos) << v.message;
}

TEST(Schedule, WaitingOnAFinishedRankIsUnmatched) {
  auto v = check_schedule({steps({{true, 1, "a"}, {true, 1, "b"}}), steps({{false, 0, "a"}})});
  EXPECT_EQ(v.kind, Kind::Unmatched);
}

TEST(Schedule, ThreeRanksWaitInACycle) {
  auto v = check_schedule({steps({{false, 2, "c"}, {true, 1, "a"}}),
                           steps({{false, 0, "a"}, {true, 2, "b"}}),
                           steps({{false, 1, "b"}, {true, 0, "c"}})});
  EXPECT_EQ(v.kind, Kind::Deadlock);
  EXPECT_EQ(v.cycle.size(), 3u);
}

std::vector<RankSchedule> planner_schedule(planner::PlanConfig c) {
  c.schedule = true;
  const nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  std::vector<RankSchedule> ranks;
  for (const nlohmann::json& rank : plan.at("schedule").at("ranks")) {
    RankSchedule& r = ranks.emplace_back();
    for (const nlohmann::json& step : rank) {
      r.emplace_back();
      for (const nlohmann::json& op : step) {
        const bool send = op.contains("send");
        r.back().push_back({send, op.at(send ? "send" : "recv").get<int>(), op.at("tensor")});
      }
    }
  }
  return ranks;
}

TEST(PlannerSchedule, OneFOneBIsDeadlockFreeAndItsBugsAreNot) {
  for (int pp : {2, 3, 4})
    for (int mb : {1, 2, 3, 4, 6}) {
      planner::PlanConfig c = testing::transformer_config(4, 1, 1, pp, mb);
      c.dp = 2;
      c.batch = 2 * mb;
      auto v = check_schedule(planner_schedule(c));
      EXPECT_EQ(v.kind, Kind::Ok) << "pp" << pp << " mb" << mb << ": " << v.message;
      if (mb >= 2) {
        c.bug = "schedule-sendrecv-swapped";
        v = check_schedule(planner_schedule(c));
        EXPECT_EQ(v.kind, Kind::Deadlock) << "pp" << pp << " mb" << mb;
        EXPECT_EQ(v.cycle.size(), 2u) << v.message;
      }
      if (mb >= pp) {
        c.bug = "schedule-missing-warmup";
        v = check_schedule(planner_schedule(c));
        EXPECT_NE(v.kind, Kind::Ok) << "pp" << pp << " mb" << mb;
      }
    }
}

// Interleaved 1F1B (--vpp): each rank's chunks in Megatron's order, every
// send batched with the next receive, deadlock-free and matched for every
// pp, vpp and micro-batch count tried (micro-batches a multiple of pp).
TEST(PlannerSchedule, InterleavedIsDeadlockFree) {
  for (int pp : {2, 3, 4})
    for (int vpp : {2, 3})
      for (int groups : {1, 2, 3}) {
        const int mb = pp * groups;
        planner::PlanConfig c = testing::transformer_config(pp * vpp, 1, 1, pp, mb);
        c.vpp = vpp;
        c.batch = mb;
        auto v = check_schedule(planner_schedule(c));
        EXPECT_EQ(v.kind, Kind::Ok)
            << "pp" << pp << " vpp" << vpp << " mb" << mb << ": " << v.message;
        // The 1F1B schedule bugs are written for the non-interleaved order.
        for (const char* bug : {"schedule-missing-warmup", "schedule-sendrecv-swapped"}) {
          c.bug = bug;
          EXPECT_THROW(planner_schedule(c), std::invalid_argument) << bug;
        }
      }
}

// Each batch of the interleaved schedule posted as blocking sends, then
// blocking receives: every rank waits to send to its ring neighbour, so the
// cycle is the whole ring of pp ranks, over every pp, vpp and micro-batch
// count tried. Without --vpp there is no ring and the bug is refused.
TEST(PlannerSchedule, InterleavedUnbatchedDeadlocksAroundTheRing) {
  for (int pp : {2, 3, 4})
    for (int vpp : {2, 3})
      for (int groups : {1, 2, 3}) {
        const int mb = pp * groups;
        planner::PlanConfig c = testing::transformer_config(pp * vpp, 1, 1, pp, mb);
        c.vpp = vpp;
        c.batch = mb;
        c.bug = "schedule-vpp-unbatched";
        auto v = check_schedule(planner_schedule(c));
        EXPECT_EQ(v.kind, Kind::Deadlock) << "pp" << pp << " vpp" << vpp << " mb" << mb;
        EXPECT_EQ(v.cycle.size(), size_t(pp)) << v.message;
      }
  planner::PlanConfig c = testing::transformer_config(4, 1, 1, 2, 2);
  c.bug = "schedule-vpp-unbatched";
  EXPECT_THROW(planner_schedule(c), std::invalid_argument);
}

}  // namespace
}  // namespace shardproof
