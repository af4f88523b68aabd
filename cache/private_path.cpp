#include "cache/private_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace shardproof::cache {
namespace {

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// `st` from lstat: a symlink must not redirect us elsewhere.
Status check(const std::string& path, const struct stat& st, bool want_dir, mode_t forbidden) {
  if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
    return Status::error("refusing to use " + path + ": it is not a " +
                         (want_dir ? "directory" : "regular file") +
                         " (a symlink or another kind)");
  if (st.st_uid != geteuid())
    return Status::error("refusing to use " + path + ": it is owned by uid " +
                         std::to_string(st.st_uid) + ", not by you (uid " +
                         std::to_string(geteuid()) + ")");
  if ((st.st_mode & forbidden) != 0)
    return Status::error("refusing to use " + path + ": other users can " +
                         (forbidden == kNoOtherWrite ? "write to" : "access") + " it (mode " +
                         octal(st.st_mode) + "); run: chmod " + (want_dir ? "700 " : "600 ") +
                         path);
  return Status();
}

}  // namespace

Status check_private_dir(const std::string& dir, mode_t forbidden) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return Status::error("cannot inspect " + dir + ": " + std::strerror(errno));
  return check(dir, st, true, forbidden);
}

Status make_private_dir(const std::string& dir, mode_t forbidden) {
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(dir).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return Status::error("cannot create " + dir + ": " + std::strerror(errno));
  return check_private_dir(dir, forbidden);
}

Status check_private_file(const std::string& path, mode_t forbidden) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status();
    return Status::error("cannot inspect " + path + ": " + std::strerror(errno));
  }
  return check(path, st, false, forbidden);
}

}  // namespace shardproof::cache
