// Starting a daemon in the background, as `shardproof daemon start` and an
// auto-starting `shardproof verify` do: a detached `shardproof daemon run`
// in its own session, its output appended to the log next to its socket.
#pragma once

#include <string>
#include <vector>

#include "daemon/state_dir.h"
#include "engine/core/status.h"

namespace shardproof::daemon {

// Starts `<this executable> daemon run <run_args>` and waits until a daemon
// answers on the socket (this one, or one that won a race to start), at
// most `wait_ms`.
Status start_daemon(const DaemonPaths& paths, const std::vector<std::string>& run_args,
                    int wait_ms = 10000);

// Asks the daemon to stop and waits until it has released its lock; falls
// back to SIGTERM when it does not answer. `was_running` tells whether
// there was one.
Status stop_daemon(const DaemonPaths& paths, bool* was_running, int wait_ms = 10000);

}  // namespace shardproof::daemon
