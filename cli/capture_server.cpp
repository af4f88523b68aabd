#include "cli/capture_server.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "daemon/state_dir.h"

extern char** environ;

namespace shardproof::cli {
namespace {

// A child's environment (hooks::environment_with) by name, as the request
// carries it.
std::map<std::string, std::string> child_env(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : hooks::environment_with(overrides)) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && eq > 0) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

// One server per interpreter and PYTHONPATH (which holds the front end).
std::string socket_path(const std::string& dir, const std::string& python,
                        const std::map<std::string, std::string>& env) {
  auto it = env.find("PYTHONPATH");
  const std::string identity = python + '\0' + (it == env.end() ? "" : it->second);
  char name[64];
  std::snprintf(name, sizeof name, "/capture-%016llx.sock",
                static_cast<unsigned long long>(XXH3_64bits(identity.data(), identity.size())));
  return dir + name;
}

int connect_to(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Starts `python -m shardproof_torch serve --socket PATH` detached (its own
// session, not our child), with the capture's environment.
void start_detached(const std::string& python, const std::string& path,
                    const std::map<std::string, std::string>& env, const std::string& log) {
  std::vector<std::string> strings;
  for (const auto& [k, v] : env) strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = {python, "-m", "shardproof_torch", "serve", "--socket", path};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return;
  if (pid == 0) {
    setsid();
    if (fork() != 0) _exit(0);
    // Not the caller's directory: `-m` would import from it, and the server
    // outlives it. Each capture runs in its own request's directory.
    if (chdir("/") != 0) _exit(127);
    const int null = open("/dev/null", O_RDWR);
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    dup2(null, 0);
    dup2(null, 1);
    dup2(err >= 0 ? err : null, 2);
    // Nothing else of ours: an inherited pipe would keep a reader of this
    // process's output (a CI runner, a test harness) waiting for its end.
    close_range(3, ~0U, 0);
    environ = envp.data();
    execvp(python.c_str(), argv.data());
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
}

bool send_request(int sock, const std::string& text, const int fds[3]) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds, 3 * sizeof(int));
  ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  if (n < 0) return false;
  size_t sent = static_cast<size_t>(n);
  while (sent < text.size()) {  // the descriptors went with the first part
    n = send(sock, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The server's one-line answer (empty when it closed without one).
std::string read_answer(int sock) {
  std::string answer;
  char buf[256];
  while (answer.find('\n') == std::string::npos) {
    const ssize_t n = read(sock, buf, sizeof buf);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  return answer;
}

std::string read_all(int fd) {
  std::string out;
  lseek(fd, 0, SEEK_SET);
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::optional<hooks::ProcessResult> ask(int sock, const std::string& python,
                                        const std::vector<std::string>& args,
                                        const hooks::ProcessOptions& options,
                                        const std::map<std::string, std::string>& env,
                                        bool* stale) {
  std::string request;
  try {
    char cwd[4096];
    nlohmann::json j = {{"python", python},
                        {"argv", args},
                        {"cwd", !options.cwd.empty()      ? options.cwd
                                : getcwd(cwd, sizeof cwd) ? std::string(cwd)
                                                          : std::string(".")},
                        {"env", env}};
    request = j.dump() + "\n";
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // an environment that is not UTF-8: the front end runs itself
  }
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int out = open("/dev/null", O_WRONLY | O_CLOEXEC);
  const int err = memfd_create("shardproof-capture-stderr", MFD_CLOEXEC);
  std::optional<hooks::ProcessResult> result;
  if (in >= 0 && out >= 0 && err >= 0) {
    const int fds[3] = {in, out, err};
    if (send_request(sock, request, fds)) {
      try {
        const nlohmann::json answer = nlohmann::json::parse(read_answer(sock));
        if (answer.contains("exit") && answer["exit"].is_number_integer()) {
          result.emplace();
          result->exit_code = answer["exit"].get<int>();
          result->err = read_all(err);
        } else if (answer.value("stale", false)) {
          *stale = true;
        }
      } catch (const nlohmann::json::exception&) {  // closed without an answer
      }
    }
  }
  for (int fd : {in, out, err})
    if (fd >= 0) close(fd);
  return result;
}

}  // namespace

hooks::ProcessResult capture_through_server(const std::string& python,
                                            const std::vector<std::string>& args,
                                            const hooks::ProcessOptions& options,
                                            const std::function<hooks::ProcessResult()>& direct,
                                            std::function<void()>* start_server) {
  if (const char* off = std::getenv("SHARDPROOF_CAPTURE_SERVER"); off && std::string(off) == "0")
    return direct();
  const std::string dir = daemon::state_dir();
  if (!daemon::prepare_state_dir(dir).ok()) return direct();
  const std::map<std::string, std::string> env = child_env(options.env);
  const std::string path = socket_path(dir, python, env);
  if (path.size() >= sizeof(sockaddr_un::sun_path)) return direct();
  if (const int sock = connect_to(path); sock >= 0) {
    bool stale = false;
    std::optional<hooks::ProcessResult> served = ask(sock, python, args, options, env, &stale);
    close(sock);
    if (served) return std::move(*served);
    if (!stale) return direct();  // a server that did not answer: it may still be busy
  }
  *start_server = [python, path, env, log = dir + "/capture-server.log"] {
    start_detached(python, path, env, log);
  };
  return direct();
}

int stop_capture_servers() {
  namespace fs = std::filesystem;
  std::error_code ec;
  int stopped = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(daemon::state_dir(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("capture-", 0) == 0 && e.path().extension() == ".sock" &&
        fs::remove(e.path(), ec))
      ++stopped;
  }
  return stopped;
}

}  // namespace shardproof::cli
