// Where `verify` sends a plan: to the daemon (the default), or to the same
// engine and cache in this process (--no-daemon; --no-cache also skips the
// cache). Both take the plan as self-contained text and return the report.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cache/cached_stage_store.h"
#include "cache/verdict_cache.h"
#include "daemon/client.h"
#include "engine/report/report.h"
#include "engine/verifier.h"

namespace shardproof::cli {

class VerifyBackend {
 public:
  virtual ~VerifyBackend() = default;
  // nullopt when the backend broke down (the daemon went away): the caller
  // says so and verifies in process instead.
  virtual std::optional<Report> verify(const std::string& path, const std::string& text,
                                       const VerifyOptions& options) = 0;
};

class InProcessBackend : public VerifyBackend {
 public:
  // `cache` may be null: then nothing is looked up or kept.
  explicit InProcessBackend(std::unique_ptr<cache::VerdictCache> cache);
  std::optional<Report> verify(const std::string& path, const std::string& text,
                               const VerifyOptions& options) override;

 private:
  std::unique_ptr<cache::VerdictCache> cache_;
  std::unique_ptr<cache::CachedStageStore> store_;
};

class DaemonBackend : public VerifyBackend {
 public:
  explicit DaemonBackend(std::unique_ptr<daemon::DaemonClient> client)
      : client_(std::move(client)) {}
  std::optional<Report> verify(const std::string& path, const std::string& text,
                               const VerifyOptions& options) override;
  const std::string& last_error() const { return last_error_; }

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
