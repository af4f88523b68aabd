// A client on the daemon's socket that can misbehave: sends any bytes,
// reads answers line by line (tests of the daemon through its socket).
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/protocol.h"

namespace shardproof::testing {

class RawClient {
 public:
  explicit RawClient(const std::string& socket_path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", socket_path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{10, 0};  // a daemon that stops answering fails the test, not hangs it
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { close(); }
  bool connected() const { return connected_; }

  bool send(const std::string& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // The next line as JSON; a discarded value when the connection ended.
  nlohmann::json read() {
    for (;;) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        nlohmann::json j = nlohmann::json::parse(buffer_.substr(0, nl), nullptr, false);
        buffer_.erase(0, nl + 1);
        return j;
      }
      char chunk[65536];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return nlohmann::json(nlohmann::json::value_t::discarded);
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  nlohmann::json hello(const std::string& build, int protocol = daemon::kProtocolVersion) {
    send(nlohmann::json{{"type", "hello"}, {"protocol", protocol}, {"build", build}}.dump() + "\n");
    return read();
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;
};

}  // namespace shardproof::testing
