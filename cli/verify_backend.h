// Where `verify` sends a plan: to the daemon (the default, daemon_backend.h),
// or to the same engine and cache in this process (--no-daemon; --no-cache
// also skips the cache). Both take the plan as self-contained text and
// return the report.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "cache/cached_stage_store.h"
#include "cache/verdict_cache.h"
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

}  // namespace shardproof::cli
