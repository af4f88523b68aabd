#include "hooks/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string_view>

extern char** environ;

namespace shardproof::hooks {
namespace {

// Both ends close on exec; the child gets its ends through dup2 actions.
bool make_pipe(int fds[2]) {
  return pipe2(fds, O_CLOEXEC) == 0;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// write(2) without dying of SIGPIPE when the child stopped reading: EPIPE
// comes back instead, and the child's exit code tells the rest.
ssize_t write_no_sigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  ssize_t w = ::write(fd, data, size);
  int saved = errno;
  if (w < 0 && saved == EPIPE) {
    timespec zero{0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);  // consume the pending signal
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return w;
}

}  // namespace

std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> env(overrides);
  for (char** e = environ; *e; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& o : overrides) replaced |= o.compare(0, o.find('='), name) == 0;
    if (!replaced) env.emplace_back(entry);
  }
  return env;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  ProcessResult result;
  if (argv.empty()) return result;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if ((options.input && !make_pipe(in)) || !make_pipe(out) ||
      (!options.merge_stderr && !make_pipe(err))) {
    for (int* p : {in, out, err}) close_fd(p[0]), close_fd(p[1]);
    result.err = "cannot create a pipe";
    return result;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (options.input)
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  else
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, options.merge_stderr ? out[1] : err[1], STDERR_FILENO);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env = environment_with(options.env);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  int spawn_error = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close_fd(in[0]);
  close_fd(out[1]);
  close_fd(err[1]);
  if (spawn_error != 0) {
    for (int* p : {in, out, err}) close_fd(p[0]), close_fd(p[1]);
    result.err = "cannot run " + argv[0] + ": " + strerror(spawn_error);
    return result;
  }

  // Feed stdin and drain both outputs together: a child that fills one pipe
  // while we wait on another would otherwise deadlock with us.
  const std::string input = options.input.value_or("");
  size_t written = 0;
  if (in[1] >= 0 && input.empty()) close_fd(in[1]);
  if (in[1] >= 0) fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
  while (out[0] >= 0 || err[0] >= 0 || in[1] >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out[0] >= 0) fds[n++] = {out[0], POLLIN, 0};
    if (err[0] >= 0) fds[n++] = {err[0], POLLIN, 0};
    if (in[1] >= 0) fds[n++] = {in[1], POLLOUT, 0};
    if (poll(fds, n, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in[1]) {
        ssize_t w = write_no_sigpipe(in[1], input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || written == input.size())
          close_fd(in[1]);
        continue;
      }
      char buf[65536];
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (r <= 0) {
        close_fd(fds[i].fd == out[0] ? out[0] : err[0]);
        continue;
      }
      (fds[i].fd == out[0] ? result.out : result.err).append(buf, static_cast<size_t>(r));
    }
  }
  for (int* p : {in, out, err}) close_fd(p[0]), close_fd(p[1]);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    result.exit_code = 128 + WTERMSIG(status);
  return result;
}

}  // namespace shardproof::hooks
