// The daemon as a VerifyBackend: the plan goes over the socket, progress
// comes back as events, and the report is rebuilt from its JSON.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/verify_backend.h"
#include "daemon/client.h"
#include "engine/core/status.h"

namespace shardproof::cli {

class DaemonBackend : public VerifyBackend {
 public:
  explicit DaemonBackend(std::unique_ptr<daemon::DaemonClient> client)
      : client_(std::move(client)) {}
  std::optional<Report> verify(const std::string& path, const std::string& text,
                               const VerifyOptions& options) override;
  const std::string& last_error() const { return last_error_; }
  bool timed_out() const { return client_->timed_out(); }

 private:
  std::unique_ptr<daemon::DaemonClient> client_;
  std::string last_error_;
};

// Connects to this build's daemon for the current cache, starting one when
// none answers (with `run_args` for `daemon run`). Null with `status` set
// when that fails; the caller verifies in process.
std::unique_ptr<DaemonBackend> connect_daemon(const std::vector<std::string>& run_args,
                                              Status* status);

}  // namespace shardproof::cli
