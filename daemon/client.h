// The client side of the protocol: a blocking connection to a running
// daemon (plain POSIX sockets; the CLI has nothing else to do meanwhile).
// It talks only to a daemon of this user (SO_PEERCRED) and never waits
// forever: a running request's daemon sends a heartbeat every few seconds,
// and a daemon silent for longer than the wait given (a stopped or hung
// one) is given up on.
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
  // How long a call waits for the next message before giving up:
  // $SHARDPROOF_DAEMON_TIMEOUT ("60", "2m"), else 60 s.
  static int default_silence_ms();

  // Connects and exchanges hellos (this build's id and protocol). Fails when
  // nothing listens, another user's process listens, or a daemon of another
  // build or protocol answers.
  static std::unique_ptr<DaemonClient> connect(const std::string& socket_path, Status* status,
                                               int timeout_ms = 5000);
  ~DaemonClient();
  DaemonClient(const DaemonClient&) = delete;
  DaemonClient& operator=(const DaemonClient&) = delete;

  // Whether a call gave up on a daemon that sent nothing (stopped, hung):
  // it may hold the cache's write lock too.
  bool timed_out() const { return timed_out_; }

  // The daemon's hello (it carries the daemon's pid).
  const nlohmann::json& hello() const { return hello_; }

  // Sends `request` with a fresh id, then `payload` when the request
  // announces one, and waits for its final message (a `result` or an
  // `error`, returned in `final`); `progress` events go to on_progress.
  // Fails when the daemon goes away before answering, or sends nothing for
  // `silence_ms` (< 0: default_silence_ms()).
  Status call(nlohmann::json request, const std::function<void(const nlohmann::json&)>& on_progress,
              nlohmann::json* final, std::string_view payload = {}, int silence_ms = -1);

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
  bool timed_out_ = false;
};

}  // namespace shardproof::daemon
