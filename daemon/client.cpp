#include "daemon/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "daemon/build_id.h"
#include "daemon/protocol.h"
#include "engine/core/units.h"

namespace shardproof::daemon {

using nlohmann::json;

namespace {

// Answers are bounded by the plan's findings; this only stops runaway input.
constexpr size_t kMaxAnswerFrame = 4 * kDefaultFrameLimit;

// The process listening on the socket runs as this user, or nobody is trusted.
Status check_peer(int fd, const std::string& socket_path) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0)
    return Status::error("cannot tell who listens on " + socket_path + ": " + std::strerror(errno));
  if (cred.uid != geteuid())
    return Status::error("refusing the process listening on " + socket_path + ": it runs as uid " +
                         std::to_string(cred.uid) + ", not as you (uid " +
                         std::to_string(geteuid()) + ")");
  return Status();
}

std::string describe_error(const json& m) {
  return m.value("code", std::string("error")) + ": " + m.value("message", std::string());
}

}  // namespace

std::unique_ptr<DaemonClient> DaemonClient::connect(const std::string& socket_path, Status* status,
                                                    int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) {
    *status = Status::error("socket path too long: " + socket_path);
    return nullptr;
  }
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *status = Status::error("no daemon answers on " + socket_path + ": " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  if (Status s = check_peer(fd, socket_path); !s.ok()) {
    *status = s;
    ::close(fd);
    return nullptr;
  }
  // A daemon that stops reading (stopped, hung) must not block a send forever.
  timeval send_timeout{default_silence_ms() / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
  // A plan's text goes through in larger pieces: fewer wake-ups of both
  // sides for tens of MB (the kernel caps it at net.core.wmem_max).
  int send_buffer = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
  std::unique_ptr<DaemonClient> client(new DaemonClient(fd));
  json greeting = hello_message(build_id());
  greeting["heartbeat"] = true;  // a running request then proves the daemon alive
  if (Status s = client->send_all(to_frame(greeting)); !s.ok()) {
    *status = s;
    return nullptr;
  }
  std::string line;
  if (Status s = client->read_line(&line, timeout_ms); !s.ok()) {
    *status = Status::error("the daemon did not answer hello: " + s.message());
    return nullptr;
  }
  json hello = json::parse(line, nullptr, false);
  if (hello.is_discarded() || !hello.is_object() || hello.value("type", std::string()) != "hello") {
    *status = Status::error("the daemon refused hello: " +
                            (hello.is_object() ? describe_error(hello) : line.substr(0, 200)));
    return nullptr;
  }
  if (hello.value("protocol", 0) != kProtocolVersion ||
      hello.value("build", std::string()) != build_id()) {
    *status = Status::error("a daemon of another build answers on " + socket_path);
    return nullptr;
  }
  client->hello_ = hello;
  return client;
}

int DaemonClient::default_silence_ms() {
  if (const char* env = std::getenv("SHARDPROOF_DAEMON_TIMEOUT")) {
    std::optional<int64_t> seconds = parse_duration_seconds(env);
    if (seconds && *seconds > 0 && *seconds < 86400) return static_cast<int>(*seconds * 1000);
  }
  return 60'000;
}

DaemonClient::~DaemonClient() {
  ::close(fd_);
}

Status DaemonClient::send_all(std::string_view data, std::string_view more) {
  std::string_view parts[2] = {data, more};
  while (!parts[0].empty() || !parts[1].empty()) {
    iovec iov[2];
    size_t count = 0;
    for (std::string_view part : parts)
      if (!part.empty()) iov[count++] = {const_cast<char*>(part.data()), part.size()};
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = count;
    ssize_t n = ::sendmsg(fd_, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      timed_out_ = true;
      return Status::error("the daemon stopped reading (timed out after " +
                           std::to_string(default_silence_ms() / 1000) + " s)");
    }
    if (n <= 0)
      return Status::error(std::string("cannot write to the daemon: ") + std::strerror(errno));
    auto sent = static_cast<size_t>(n);
    for (std::string_view& part : parts) {
      size_t take = std::min(sent, part.size());
      part.remove_prefix(take);
      sent -= take;
    }
  }
  return Status();
}

Status DaemonClient::read_line(std::string* line, int timeout_ms) {
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      *line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return Status();
    }
    if (buffer_.size() > kMaxAnswerFrame)
      return Status::error("the daemon sent an oversized frame");
    pollfd p{fd_, POLLIN, 0};
    int ready = poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      timed_out_ = true;
      return Status::error("the daemon sent nothing for " + std::to_string(timeout_ms / 1000) +
                           " s (stopped or hung?)");
    }
    char chunk[64 * 1024];
    ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error("the daemon closed the connection");
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

Status DaemonClient::call(json request, const std::function<void(const json&)>& on_progress,
                          json* final, std::string_view payload, int silence_ms) {
  if (silence_ms < 0) silence_ms = default_silence_ms();
  json id = next_id_++;
  request["id"] = id;
  if (Status s = send_all(to_frame(request), payload); !s.ok()) return s;
  for (;;) {
    std::string line;
    if (Status s = read_line(&line, silence_ms); !s.ok()) return s;
    json m = json::parse(line, nullptr, false);
    if (m.is_discarded() || !m.is_object())
      return Status::error("the daemon sent a malformed frame");
    std::string type = m.value("type", std::string());
    if (m.value("id", json()) != id) {
      // An error without our id ends the connection (say, a frame it refused).
      if (type == "error") return Status::error("the daemon refused: " + describe_error(m));
      continue;
    }
    if (type == "progress") {
      if (on_progress) on_progress(m);
      continue;
    }
    *final = std::move(m);
    return Status();
  }
}

}  // namespace shardproof::daemon
