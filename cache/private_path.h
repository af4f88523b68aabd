// The checks that keep another user out of what shardproof trusts: the
// daemon's runtime directory, the cache directory and its store, the key
// that authenticates the cache. Anyone who can write one of them could
// plant a forged verdict or impersonate the daemon, so each must be a real
// directory or file (not a symlink) owned by this user and not writable by
// others; a clear refusal otherwise (docs/security.md).
#pragma once

#include <sys/types.h>

#include <string>

#include "engine/core/status.h"

namespace shardproof::cache {

// Mode bits a private directory or file must not have.
inline constexpr mode_t kNoOtherWrite = 022;   // the cache: no group/other write
inline constexpr mode_t kNoOtherAccess = 077;  // the runtime dir, the key: nothing for others

// `dir` must exist as a directory owned by this user without `forbidden` bits.
Status check_private_dir(const std::string& dir, mode_t forbidden);
// Creates `dir` (0700, parents as needed) when missing, then checks it.
Status make_private_dir(const std::string& dir, mode_t forbidden);
// A file that does not exist passes; one that does must be a regular file
// owned by this user without `forbidden` bits.
Status check_private_file(const std::string& path, mode_t forbidden);

}  // namespace shardproof::cache
