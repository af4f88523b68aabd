#include "cli/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

namespace shardproof::cli {
namespace {

int wake_fd[2] = {-1, -1};
std::mutex paths_mutex;
std::vector<std::string>& paths() {
  static std::vector<std::string> registered;
  return registered;
}

// Async-signal-safe: one byte naming the signal.
void on_signal(int signum) {
  int saved = errno;
  char byte = static_cast<char>(signum);
  if (write(wake_fd[1], &byte, 1) < 0) {
    // Nothing more can be done from here.
  }
  errno = saved;
}

void watch() {
  char byte = 0;
  while (read(wake_fd[0], &byte, 1) < 0 && errno == EINTR) {
  }
  const int signum = byte;
  {
    std::lock_guard<std::mutex> lock(paths_mutex);
    for (const std::string& p : paths()) {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  }
  const char message[] = "\nshardproof: interrupted\n";
  if (write(STDERR_FILENO, message, sizeof message - 1) < 0) {
    // stderr is gone; the exit code still tells.
  }
  _exit(128 + signum);
}

}  // namespace

void handle_interrupts() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(wake_fd, O_CLOEXEC) != 0) return;
    std::thread(watch).detach();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
  });
}

void remove_on_interrupt(const std::string& path) {
  std::lock_guard<std::mutex> lock(paths_mutex);
  paths().push_back(path);
}

void forget_on_interrupt(const std::string& path) {
  std::lock_guard<std::mutex> lock(paths_mutex);
  auto& p = paths();
  p.erase(std::remove(p.begin(), p.end(), path), p.end());
}

}  // namespace shardproof::cli
