// Identifies this build of shardproof: its version and the linker's GNU
// build-id (a hash of the executable when there is none). The daemon's
// socket name and hello carry it, so a daemon of an older build never
// answers a newer client.
#pragma once

#include <string>

namespace shardproof::daemon {

std::string build_id();

}  // namespace shardproof::daemon
