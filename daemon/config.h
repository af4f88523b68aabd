// How a daemon runs: where it listens, which cache it serves, its solver
// threads and the limits that protect it from broken or hostile clients.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/protocol.h"
#include "daemon/state_dir.h"

namespace shardproof::daemon {

struct DaemonConfig {
  DaemonPaths paths;
  std::string cache_dir;            // empty: run without a cache
  uint64_t cache_max_bytes = 0;     // 0: the cache's default
  int jobs = 0;                     // solver threads; 0: one per core
  int idle_timeout_seconds = 3600;  // exit after this long without requests; 0: never
  uint64_t frame_limit = kDefaultFrameLimit;
  int max_active_requests = 16;  // verify/stats requests running at once
  int max_connections = 256;
  // A client that starts a frame and does not finish it within this time is dropped.
  int partial_frame_timeout_seconds = 30;
  // A connection that has not said hello within this time, or (greeted)
  // has nothing running and says nothing for this long, is closed; 0: never.
  int hello_timeout_seconds = 10;
  int connection_idle_seconds = 120;
  // On shutdown, running requests get this long to finish.
  int shutdown_grace_seconds = 2;
  // Plans whose last verification is kept for re-verifying their edits
  // (PlanMemos); each costs about as much memory as verifying it.
  size_t plan_memos = 2;
  // What running verifies may hold at once (MemoryBudget); 0: the default.
  uint64_t memory_budget_bytes = 0;
};

}  // namespace shardproof::daemon
