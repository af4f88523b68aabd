#include "daemon/state_dir.h"

#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstdlib>

#include "cache/private_path.h"
#include "cache/remote_store.h"
#include "daemon/build_id.h"

namespace shardproof::daemon {

std::string state_dir() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && runtime[0] == '/') return std::string(runtime) + "/shardproof";
  return "/tmp/shardproof-" + std::to_string(geteuid());
}

Status prepare_state_dir(const std::string& dir) {
  return cache::make_private_dir(dir, cache::kNoOtherAccess);
}

namespace {

// The remote tier a daemon started from this environment would use
// (cache/remote_store.h): changing it must reach a daemon that uses it, not
// one started before. Empty without a remote (the identity of daemons
// without one is what it always was).
std::string remote_identity() {
  std::string problem;
  cache::RemoteSettings r = cache::remote_settings_from_env(&problem);
  if (r.url.empty()) return "";
  return "\nremote " + r.url + "\n" +
         (r.mode == cache::RemoteMode::ReadOnly ? "read-only" : "read-write") + "\n" +
         std::to_string(r.timeout.count()) + "\n" + r.key_file;
}

}  // namespace

Status daemon_paths(const std::string& cache_dir, DaemonPaths* out) {
  DaemonPaths p;
  p.cache_dir = cache_dir;
  p.dir = state_dir();
  if (Status s = prepare_state_dir(p.dir); !s.ok()) return s;
  std::string identity = build_id() + "\n" + cache_dir + remote_identity();
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(identity.data(), identity.size())));
  std::string stem = p.dir + "/sp-" + hash;
  p.socket = stem + ".sock";
  p.lock = stem + ".lock";
  p.log = stem + ".log";
  if (p.socket.size() >= sizeof(sockaddr_un{}.sun_path))
    return Status::error("the daemon's socket path " + p.socket + " is longer than " +
                         std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) +
                         " bytes, the limit of a Unix socket; set XDG_RUNTIME_DIR to a shorter "
                         "directory");
  *out = p;
  return Status();
}

}  // namespace shardproof::daemon
