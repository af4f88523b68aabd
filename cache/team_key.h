// The team key: the secret that authenticates records in the remote tier of
// the verdict cache (remote_store.h). Every runner and developer of a team
// holds the same 32 bytes in a file of mode 0600 named by
// $SHARDPROOF_CACHE_KEY_FILE; a runner without it reads nothing useful from
// the remote and writes nothing that others believe.
#pragma once

#include <optional>
#include <string>

#include "cache/cache_key.h"
#include "engine/core/status.h"

namespace shardproof::cache {

// $SHARDPROOF_CACHE_KEY_FILE made absolute, or empty: only a key named on
// purpose is a team key (the per-user default is never shared).
std::string team_key_file_from_env();

// Reads the team key at `path`. Unlike the per-user key it is never created
// here (a fresh random key would match no one's); a missing file, one that
// others can read or write, or one that is not exactly a key is refused.
std::optional<MacKey> load_team_key(const std::string& path, Status* status);

}  // namespace shardproof::cache
