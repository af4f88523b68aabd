// The socket, lock and log files of daemons that are gone (older builds,
// other caches) pile up in the state directory: a starting daemon removes
// those whose lock nobody holds and that nobody touched for a while (a
// daemon just starting may not hold its lock yet).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/state_dir.h"

namespace shardproof::daemon {

inline constexpr int64_t kStaleFileSeconds = 24 * 3600;

// Removes the files of other daemons in `own.dir` whose lock is free and
// none of whose files changed in `min_age_seconds`. Returns how many
// daemons' files were removed.
int remove_stale_files(const DaemonPaths& own, int64_t min_age_seconds = kStaleFileSeconds);

}  // namespace shardproof::daemon
