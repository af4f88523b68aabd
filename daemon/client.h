// The client side of the protocol: a blocking connection to a running
// daemon (plain POSIX sockets; the CLI has nothing else to do meanwhile).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/core/status.h"

namespace shardproof::daemon {

class DaemonClient {
 public:
  // Connects and exchanges hellos (this build's id and protocol). Fails when
  // nothing listens, or a daemon of another build or protocol answers.
  static std::unique_ptr<DaemonClient> connect(const std::string& socket_path, Status* status,
                                               int timeout_ms = 5000);
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  // The daemon's hello (it carries the daemon's pid).
  const nlohmann::json& hello() const { return hello_; }

  // Sends `request` with a fresh id, then `payload` when the request
  // announces one, and waits for its final message (a `result` or an
  // `error`, returned in `final`); `progress` events go to on_progress.
  // Fails when the daemon goes away before answering.
  Status call(nlohmann::json request, const std::function<void(const nlohmann::json&)>& on_progress,
              nlohmann::json* final, std::string_view payload = {});

 private:
  explicit DaemonClient(int fd) : fd_(fd) {}
  // `data` then `more`, as one gathered write (no joined copy of a payload).
  Status send_all(std::string_view data, std::string_view more = {});
  // One line; timeout_ms < 0 waits as long as it takes.
  Status read_line(std::string* line, int timeout_ms);

  int fd_;
  std::string buffer_;
  nlohmann::json hello_;
  int64_t next_id_ = 1;
};

}  // namespace shardproof::daemon
