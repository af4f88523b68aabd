#include "daemon/state_dir.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "daemon/build_id.h"

namespace shardproof::daemon {
namespace {

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

std::string state_dir() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  if (runtime && runtime[0] == '/') return std::string(runtime) + "/shardproof";
  return "/tmp/shardproof-" + std::to_string(geteuid());
}

Status prepare_state_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::error("cannot create " + dir + ": " + std::strerror(errno));
  struct stat st;
  // lstat: a symlink planted in /tmp must not redirect us elsewhere.
  if (lstat(dir.c_str(), &st) != 0)
    return Status::error("cannot inspect " + dir + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return Status::error("refusing to use " + dir +
                         ": it is not a directory (a symlink or a file)");
  if (st.st_uid != geteuid())
    return Status::error("refusing to use " + dir + ": it is owned by uid " +
                         std::to_string(st.st_uid) + ", not by you (uid " +
                         std::to_string(geteuid()) + ")");
  if ((st.st_mode & 077) != 0)
    return Status::error("refusing to use " + dir + ": other users can access it (mode " +
                         octal(st.st_mode) + "); run: chmod 700 " + dir);
  return Status();
}

Status daemon_paths(const std::string& cache_dir, DaemonPaths* out) {
  DaemonPaths p;
  p.cache_dir = cache_dir;
  p.dir = state_dir();
  if (Status s = prepare_state_dir(p.dir); !s.ok()) return s;
  std::string identity = build_id() + "\n" + cache_dir;
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
