// The verdict cache as the CLI opens it in its own process (verify
// --no-daemon, the cache command): the default location and size cap.
#pragma once

#include <memory>

#include "cache/verdict_cache.h"
#include "engine/core/status.h"

namespace shardproof::cli {

std::unique_ptr<cache::VerdictCache> open_local_cache(Status* status);

}  // namespace shardproof::cli
