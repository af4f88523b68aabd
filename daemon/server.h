// The daemon process: takes the pid lock, listens on the Unix socket with
// libuv, frames and dispatches requests to the Service, and stops on
// `shutdown`, a signal or idleness. The loop thread only moves bytes;
// verifications run on request threads and their solver pool.
#pragma once

#include "daemon/config.h"

namespace shardproof::daemon {

// Exit codes of run_daemon.
constexpr int kDaemonExitOk = 0;
constexpr int kDaemonExitRunning = 1;  // another daemon already serves this socket
constexpr int kDaemonExitError = 4;    // could not listen (the reason is on stderr)

// Serves until stopped; logs to stderr.
int run_daemon(const DaemonConfig& config);

}  // namespace shardproof::daemon
