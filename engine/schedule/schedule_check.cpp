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

void check_peers(const std::vector<RankSchedule>& ranks) {
  const int n = static_cast<int>(ranks.size());
  for (int r = 0; r < n; ++r)
    for (size_t s = 0; s < ranks[r].size(); ++s)
      for (const P2P& op : ranks[r][s])
        if (op.peer < 0 || op.peer >= n || op.peer == r)
          throw std::invalid_argument(describe(r, s, op) +
                                      ": peer is not another rank of the schedule");
}

class Simulation {
 public:
  explicit Simulation(const std::vector<RankSchedule>& ranks)
      : ranks_(ranks), n_(static_cast<int>(ranks.size())), state_(ranks.size()) {
    for (int r = 0; r < n_; ++r) start(r);
  }

  // Runs until nothing moves; a tag mismatch ends it with that verdict.
  ScheduleVerdict run() {
    ScheduleVerdict v;
    for (bool progress = true; progress;) {
      progress = match_sends(v);
      if (v.kind != ScheduleVerdict::Kind::Ok) return v;
      progress = advance() || progress;
    }
    return stuck();
  }

 private:
  bool finished(int r) const { return state_[r].step >= ranks_[r].size(); }

  void start(int r) {
    while (!finished(r) && ranks_[r][state_[r].step].empty()) ++state_[r].step;
    if (!finished(r)) state_[r].done.assign(ranks_[r][state_[r].step].size(), false);
  }

  // Pairs every pending send with the first pending receive of its channel.
  bool match_sends(ScheduleVerdict& v) {
    bool progress = false;
    for (int r = 0; r < n_; ++r) {
      if (finished(r)) continue;
      const Step& step = ranks_[r][state_[r].step];
      for (size_t i = 0; i < step.size(); ++i) {
        const P2P& op = step[i];
        if (state_[r].done[i] || !op.send || finished(op.peer)) continue;
        // The first pending receive from r in the peer's current step (FIFO:
        // an earlier pending send of r to the same peer goes first).
        bool earlier = false;
        for (size_t k = 0; k < i; ++k)
          earlier = earlier || (!state_[r].done[k] && step[k].send && step[k].peer == op.peer);
        if (earlier) continue;
        const int q = op.peer;
        const Step& theirs = ranks_[q][state_[q].step];
        for (size_t j = 0; j < theirs.size(); ++j) {
          if (state_[q].done[j] || theirs[j].send || theirs[j].peer != r) continue;
          if (theirs[j].tag != op.tag) {
            v.kind = ScheduleVerdict::Kind::Mismatch;
            v.message =
                describe(r, state_[r].step, op) + ", but " + describe(q, state_[q].step, theirs[j]);
            return false;
          }
          state_[r].done[i] = state_[q].done[j] = true;
          progress = true;
          break;
        }
      }
    }
    return progress;
  }

  // Moves every rank whose step is complete to its next step.
  bool advance() {
    bool progress = false;
    for (int r = 0; r < n_; ++r) {
      if (finished(r)) continue;
      bool complete = true;
      for (bool d : state_[r].done) complete = complete && d;
      if (!complete) continue;
      ++state_[r].step;
      start(r);
      progress = true;
    }
    return progress;
  }

  // Stuck (or done): who waits on whom (a rank's first pending operation).
  ScheduleVerdict stuck() const {
    ScheduleVerdict v;
    std::vector<int> waits(n_, -1);
    std::vector<std::string> what(n_);
    for (int r = 0; r < n_; ++r) {
      if (finished(r)) continue;
      const Step& step = ranks_[r][state_[r].step];
      for (size_t i = 0; i < step.size() && waits[r] < 0; ++i)
        if (!state_[r].done[i]) {
          waits[r] = step[i].peer;
          what[r] = describe(r, state_[r].step, step[i]);
        }
    }
    for (int r = 0; r < n_; ++r)
      if (waits[r] >= 0 && finished(waits[r])) {
        v.kind = ScheduleVerdict::Kind::Unmatched;
        v.message = what[r] + ", but rank " + std::to_string(waits[r]) + " has finished";
        return v;
      }
    for (int r = 0; r < n_; ++r) {
      if (waits[r] < 0) continue;
      // Every waiting rank waits on a waiting rank: walking the edges repeats.
      std::vector<int> seen(n_, -1), path;
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

  const std::vector<RankSchedule>& ranks_;
  int n_;
  std::vector<Rank> state_;
};

}  // namespace

ScheduleVerdict check_schedule(const std::vector<RankSchedule>& ranks) {
  check_peers(ranks);
  return Simulation(ranks).run();
}

}  // namespace shardproof::schedule
