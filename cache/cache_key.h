// The per-user secret that authenticates every record of the verdict cache
// (record.h): 32 random bytes in a file of mode 0600 outside the cache
// directory, so a store copied from another user, machine or CI job, or
// rewritten by hand, fails authentication and is re-proved, never believed.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/core/status.h"

namespace shardproof::cache {

using MacKey = std::array<uint8_t, 32>;

// $SHARDPROOF_CACHE_KEY_FILE (made absolute), else
// ${XDG_STATE_HOME:-~/.local/state}/shardproof/cache.key. Empty when no
// home directory can be found.
std::string default_key_file();

// Reads the key at `path`, creating it (random, mode 0600, its directory
// 0700) when missing. Refuses a key file or directory that another user
// owns or can read, and a file that is not exactly a key.
std::optional<MacKey> load_or_create_key(const std::string& path, Status* status);

// A fingerprint of the key that reveals nothing of it (32 hex digits): the
// store remembers which key wrote it.
std::string key_id(const MacKey& key);

}  // namespace shardproof::cache
