#include "cli/verify_backend.h"

#include "cache/cached_verify.h"

namespace shardproof::cli {

InProcessBackend::InProcessBackend(std::unique_ptr<cache::VerdictCache> cache)
    : cache_(std::move(cache)),
      store_(cache_ ? std::make_unique<cache::CachedStageStore>(*cache_) : nullptr) {}

std::optional<Report> InProcessBackend::verify(const std::string& path, const std::string& text,
                                               const VerifyOptions& options) {
  VerifyOptions o = options;
  o.store = store_.get();
  Report report = cache::verify_with_cache(path, text, o, cache_.get());
  if (cache_) cache_->flush();
  return report;
}

}  // namespace shardproof::cli
