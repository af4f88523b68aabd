// The schedule simulation: each rank's current step posts its operations;
// a pending send and the first pending receive of its channel meet (and
// must move the same tensor); a rank whose step is complete moves on.
#include "engine/schedule/schedule_check.h"

#include <stdexcept>

namespace shardproof::schedule {

std::string describe(int rank, size_t step, const P2P& op) {
  return "rank " + std::to_string(rank) + " step " + std::to_string(step) + ": " +
         (op.send ? "send " + op.tag + " to " : "recv " + op.tag + " from ") +
         std::to_string(op.peer);
}

namespace {

struct Rank {
  size_t step = 0;
  std::vector<bool> done;  // per operation of the current step
};

}  // namespace

ScheduleVerdict check_schedule(const std::vector<RankSchedule>& ranks) {
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r)
    for (size_t s = 0; s < ranks[r].size(); ++s)
      for (const P2P& op : ranks[r][s])
        if (op.peer < 0 || op.peer >= n || op.peer == r)
          throw std::invalid_argument(describe(r, s, op) +
                                      ": peer is not another rank of the schedule");
  std::vector<Rank> state(n);
  auto finished = [&](int r) { return state[r].step >= ranks[r].size(); };
  auto start = [&](int r) {
    while (!finished(r) && ranks[r][state[r].step].empty()) ++state[r].step;
    if (!finished(r)) state[r].done.assign(ranks[r][state[r].step].size(), false);
  };
  for (int r = 0; r < n; ++r) start(r);

  ScheduleVerdict v;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      if (finished(r)) continue;
      const Step& step = ranks[r][state[r].step];
      for (size_t i = 0; i < step.size(); ++i) {
        const P2P& op = step[i];
        if (state[r].done[i] || !op.send || finished(op.peer)) continue;
        // The first pending receive from r in the peer's current step (FIFO:
        // an earlier pending send of r to the same peer goes first).
        bool earlier = false;
        for (size_t k = 0; k < i; ++k)
          earlier = earlier || (!state[r].done[k] && step[k].send && step[k].peer == op.peer);
        if (earlier) continue;
        const int q = op.peer;
        const Step& theirs = ranks[q][state[q].step];
        for (size_t j = 0; j < theirs.size(); ++j) {
          if (state[q].done[j] || theirs[j].send || theirs[j].peer != r) continue;
          if (theirs[j].tag != op.tag) {
            v.kind = ScheduleVerdict::Kind::Mismatch;
            v.message =
                describe(r, state[r].step, op) + ", but " + describe(q, state[q].step, theirs[j]);
            return v;
          }
          state[r].done[i] = state[q].done[j] = true;
          progress = true;
          break;
        }
      }
    }
    for (int r = 0; r < n; ++r) {
      if (finished(r)) continue;
      bool complete = true;
      for (bool d : state[r].done) complete = complete && d;
      if (!complete) continue;
      ++state[r].step;
      start(r);
      progress = true;
    }
  }

  // Stuck: who waits on whom (a rank's first pending operation).
  std::vector<int> waits(n, -1);
  std::vector<std::string> what(n);
  for (int r = 0; r < n; ++r) {
    if (finished(r)) continue;
    const Step& step = ranks[r][state[r].step];
    for (size_t i = 0; i < step.size() && waits[r] < 0; ++i)
      if (!state[r].done[i]) {
        waits[r] = step[i].peer;
        what[r] = describe(r, state[r].step, step[i]);
      }
  }
  for (int r = 0; r < n; ++r)
    if (waits[r] >= 0 && finished(waits[r])) {
      v.kind = ScheduleVerdict::Kind::Unmatched;
      v.message = what[r] + ", but rank " + std::to_string(waits[r]) + " has finished";
      return v;
    }
  for (int r = 0; r < n; ++r) {
    if (waits[r] < 0) continue;
    // Every waiting rank waits on a waiting rank: walking the edges repeats.
    std::vector<int> seen(n, -1), path;
    int x = r;
    while (seen[x] < 0) {
      seen[x] = static_cast<int>(path.size());
      path.push_back(x);
      x = waits[x];
    }
    v.kind = ScheduleVerdict::Kind::Deadlock;
    v.cycle.assign(path.begin() + seen[x], path.end());
    v.message = "deadlock:";
    for (int c : v.cycle) v.message += " " + what[c] + ";";
    v.message.pop_back();
    return v;
  }
  return v;
}

}  // namespace shardproof::schedule
