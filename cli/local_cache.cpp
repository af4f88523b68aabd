#include "cli/local_cache.h"

#include "cache/cache_location.h"

namespace shardproof::cli {

std::unique_ptr<cache::VerdictCache> open_local_cache(Status* status) {
  cache::CacheOptions options;
  options.dir = cache::default_cache_dir();
  options.max_bytes = cache::default_max_bytes();
  return cache::VerdictCache::open(options, status);
}

}  // namespace shardproof::cli
