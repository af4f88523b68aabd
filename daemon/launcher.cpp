#include "daemon/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "daemon/client.h"
#include "daemon/pid_lock.h"

namespace shardproof::daemon {
namespace {

constexpr off_t kMaxLogBytes = 1 << 20;  // a longer log starts over

std::string last_log_line(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

// In the grandchild: becomes the daemon process.
[[noreturn]] void exec_daemon(const DaemonPaths& paths, const std::vector<std::string>& run_args) {
  struct stat st;
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (stat(paths.log.c_str(), &st) == 0 && st.st_size > kMaxLogBytes) flags |= O_TRUNC;
  int log = ::open(paths.log.c_str(), flags, 0600);
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, STDIN_FILENO);
  if (log >= 0) {
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
  }
  // Nothing of the client (an open cache, its sockets, its working
  // directory) stays with the daemon; the cache it serves is named exactly.
  for (int fd = 3; fd < 1024; ++fd) ::close(fd);
  if (chdir("/") != 0) _exit(126);
  if (!paths.cache_dir.empty()) setenv("SHARDPROOF_CACHE_DIR", paths.cache_dir.c_str(), 1);
  std::vector<std::string> args = {"shardproof", "daemon", "run"};
  args.insert(args.end(), run_args.begin(), run_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // /proc/self/exe: this very binary, even if a rebuild replaced the file.
  execv("/proc/self/exe", argv.data());
  _exit(127);
}

bool answers(const std::string& socket) {
  Status status;
  return DaemonClient::connect(socket, &status, 2000) != nullptr;
}

}  // namespace

Status start_daemon(const DaemonPaths& paths, const std::vector<std::string>& run_args,
                    int wait_ms) {
  pid_t child = fork();
  if (child < 0) return Status::error("cannot fork to start the daemon");
  if (child == 0) {
    // Double fork: the daemon is nobody's child and survives our exit.
    setsid();
    if (fork() == 0) exec_daemon(paths, run_args);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (answers(paths.socket)) return Status();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string why = last_log_line(paths.log);
  return Status::error("the daemon did not come up within " + std::to_string(wait_ms / 1000) +
                       " s" + (why.empty() ? "" : " (log: " + why + ")"));
}

Status stop_daemon(const DaemonPaths& paths, bool* was_running, int wait_ms) {
  pid_t pid = lock_holder(paths.lock);
  *was_running = pid > 0;
  if (pid <= 0) return Status();
  Status status;
  if (auto client = DaemonClient::connect(paths.socket, &status, 2000)) {
    nlohmann::json answer;
    client->call({{"type", "shutdown"}}, nullptr, &answer, {}, 5000);
  } else {
    kill(pid, SIGTERM);  // holds the lock but does not answer
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (lock_holder(paths.lock) == 0) return Status();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::error("the daemon (pid " + std::to_string(pid) + ") did not stop within " +
                       std::to_string(wait_ms / 1000) + " s");
}

}  // namespace shardproof::daemon
