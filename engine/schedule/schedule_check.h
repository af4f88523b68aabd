// Deadlock freedom and matched send/recv pairs of a pipeline schedule: the
// per-rank order of point-to-point operations (docs/plan-format.md,
// "Pipeline schedules"). Independent of the graphs: an equivalence proof
// says nothing about the order in which ranks post their sends.
#pragma once

#include <string>
#include <vector>

namespace shardproof::schedule {

// One point-to-point operation: a send to or a receive from `peer`, moving
// the tensor named `tag` (e.g. "x2.mb1" forward, "grad.x2.mb1" backward).
struct P2P {
  bool send = false;
  int peer = 0;
  std::string tag;
};

// The operations a rank posts together (batch_isend_irecv): the step ends
// when every one of them has met its partner. A blocking send or receive is
// a step of one.
using Step = std::vector<P2P>;
using RankSchedule = std::vector<Step>;

struct ScheduleVerdict {
  enum class Kind { Ok, Deadlock, Mismatch, Unmatched };
  Kind kind = Kind::Ok;
  // Deadlock: the ranks of a cycle, each waiting on the next (and the last
  // on the first).
  std::vector<int> cycle;
  std::string message;  // "" when Ok
};

// Runs the schedule: channels are FIFO per (sender, receiver), as NCCL's
// point-to-point operations are; a send meets the first pending receive
// from its sender posted by its peer. Every rank's steps run in order.
// Deadlock: no operation can meet its partner while some are pending
// (reported with a cycle of waiting ranks). Mismatch: a send meets a
// receive that expects another tensor. Unmatched: an operation waits on a
// rank that has finished. `ranks[r]` is rank r's schedule; peers must be
// ranks of it (checked: std::invalid_argument otherwise).
ScheduleVerdict check_schedule(const std::vector<RankSchedule>& ranks);

// "rank 0 step 3: send x2.mb1 to 1" for messages.
std::string describe(int rank, size_t step, const P2P& op);

}  // namespace shardproof::schedule
