#include "daemon/pid_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace shardproof::daemon {
namespace {

pid_t read_pid(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return 0;
  return static_cast<pid_t>(std::atol(buf));
}

}  // namespace

std::unique_ptr<PidLock> PidLock::acquire(const std::string& path, Status* status, pid_t* holder) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    *status = Status::error("cannot open " + path + ": " + std::strerror(errno));
    return nullptr;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    // Held, perhaps by a daemon that has not written its pid yet (-1).
    if (holder) *holder = errno == EWOULDBLOCK ? std::max<pid_t>(read_pid(fd), -1) : 0;
    ::close(fd);
    *status = Status::error("another daemon holds " + path);
    return nullptr;
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock itself is what matters; the pid is only for `daemon stop`.
  }
  return std::unique_ptr<PidLock>(new PidLock(fd));
}

PidLock::~PidLock() {
  ::close(fd_);
}

pid_t lock_holder(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  pid_t pid = 0;
  if (flock(fd, LOCK_SH | LOCK_NB) != 0)
    pid = read_pid(fd);
  else
    flock(fd, LOCK_UN);
  ::close(fd);
  return pid;
}

}  // namespace shardproof::daemon
