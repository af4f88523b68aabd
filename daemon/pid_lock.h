// The lock that makes a daemon the only one on its socket: an flock held
// for the daemon's whole life on a file that holds its pid. The kernel drops
// the lock when the process dies, even by kill -9, so a stale file never
// blocks the next daemon.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "engine/core/status.h"

namespace shardproof::daemon {

class PidLock {
 public:
  // Null with `status` set when another process holds it (`holder` gets its
  // pid, or -1 when it has not written it yet) or the file cannot be opened
  // (`holder` 0).
  static std::unique_ptr<PidLock> acquire(const std::string& path, Status* status, pid_t* holder);
  ~PidLock();
  PidLock(const PidLock&) = delete;
  PidLock& operator=(const PidLock&) = delete;

 private:
  explicit PidLock(int fd) : fd_(fd) {}
  int fd_;
};

// The pid of the process holding the lock at `path`, 0 when none does.
pid_t lock_holder(const std::string& path);

}  // namespace shardproof::daemon
