// Where the verdict cache lives and how large it may grow, from the
// environment: the CLI, the daemon and the tests resolve it the same way.
#pragma once

#include <cstdint>
#include <string>

namespace shardproof::cache {

// $SHARDPROOF_CACHE_DIR (made absolute), else
// ${XDG_CACHE_HOME:-~/.cache}/shardproof. Empty when no home directory can
// be found.
std::string default_cache_dir();

// $SHARDPROOF_CACHE_MAX_SIZE ("512M", "2G"), else 1 GiB. A malformed value
// falls back to the default.
uint64_t default_max_bytes();

// $HOME, else the password database's; empty when neither has one.
std::string home_directory();

constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 30;

}  // namespace shardproof::cache
