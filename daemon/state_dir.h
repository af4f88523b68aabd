// Where a daemon's socket, lock and log live, and the checks that keep
// another user out: $XDG_RUNTIME_DIR/shardproof, else /tmp/shardproof-$UID,
// created 0700 and refused when it is not a real directory owned by this
// user or is open to others (anyone who can write there could impersonate
// the daemon).
#pragma once

#include <string>

#include "engine/core/status.h"

namespace shardproof::daemon {

struct DaemonPaths {
  std::string cache_dir;  // the cache the daemon serves (part of its identity)
  std::string dir;
  std::string socket;  // Unix socket the daemon listens on
  std::string lock;    // held by the running daemon, with its pid inside
  std::string log;     // the daemon's stderr when started in the background
};

// $XDG_RUNTIME_DIR/shardproof (when XDG_RUNTIME_DIR is an absolute path),
// else /tmp/shardproof-$UID.
std::string state_dir();

// Creates `dir` (0700) when missing, then checks it.
Status prepare_state_dir(const std::string& dir);

// The daemon serving this build, this cache directory and the remote cache
// settings of the environment (one daemon per combination: the name carries
// a hash of them, so a client whose remote settings changed reaches a new
// daemon that uses them, and the old one idles out). Fails when the state directory is
// unsafe or the socket path is too long for a Unix socket address.
Status daemon_paths(const std::string& cache_dir, DaemonPaths* out);

}  // namespace shardproof::daemon
