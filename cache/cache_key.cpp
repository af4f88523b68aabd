#include "cache/cache_key.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "cache/cache_location.h"
#include "cache/private_path.h"

namespace shardproof::cache {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Exactly the key's bytes; nullopt for a short, long or unreadable file.
std::optional<MacKey> read_key(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    *why = std::strerror(errno);
    return std::nullopt;
  }
  MacKey key{};
  uint8_t extra;
  ssize_t n = ::read(fd, key.data(), key.size());
  ssize_t more = ::read(fd, &extra, 1);
  ::close(fd);
  if (n != static_cast<ssize_t>(key.size()) || more != 0) {
    *why = "it does not hold a key of " + std::to_string(key.size()) + " bytes";
    return std::nullopt;
  }
  return key;
}

// Written under a temporary name and linked into place: two processes
// creating the key at once end up with the same one.
bool create_key(const std::string& path, std::string* why) {
  MacKey key;
  randombytes_buf(key.data(), key.size());
  std::string tmp = path + ".new." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    *why = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  bool written =
      ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size()) && ::fsync(fd) == 0;
  ::close(fd);
  sodium_memzero(key.data(), key.size());
  bool linked = written && (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST);
  if (!linked) *why = "cannot write " + path + ": " + std::strerror(errno);
  ::unlink(tmp.c_str());
  return linked;
}

}  // namespace

std::string default_key_file() {
  if (std::string file = env("SHARDPROOF_CACHE_KEY_FILE"); !file.empty()) {
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(file, ec);
    return ec ? file : absolute.lexically_normal().string();
  }
  if (std::string xdg = env("XDG_STATE_HOME"); !xdg.empty() && xdg[0] == '/')
    return xdg + "/shardproof/cache.key";
  std::string home = home_directory();
  return home.empty() ? "" : home + "/.local/state/shardproof/cache.key";
}

std::optional<MacKey> load_or_create_key(const std::string& path, Status* status) {
  if (sodium_init() < 0) {
    *status = Status::error("libsodium could not be initialised");
    return std::nullopt;
  }
  if (path.empty()) {
    *status = Status::error("no place for the cache key: set SHARDPROOF_CACHE_KEY_FILE (or HOME)");
    return std::nullopt;
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (Status s = make_private_dir(dir, kNoOtherWrite); !s.ok()) {
    *status = Status::error("the cache key's directory: " + s.message());
    return std::nullopt;
  }
  std::string why;
  if (::access(path.c_str(), F_OK) != 0 && !create_key(path, &why)) {
    *status = Status::error(why);
    return std::nullopt;
  }
  if (Status s = check_private_file(path, kNoOtherAccess); !s.ok()) {
    *status = Status::error("the cache key: " + s.message());
    return std::nullopt;
  }
  std::optional<MacKey> key = read_key(path, &why);
  if (!key) *status = Status::error("cannot read the cache key " + path + ": " + why);
  return key;
}

std::string key_id(const MacKey& key) {
  static const char kContext[] = "shardproof cache key id";
  uint8_t id[16];
  crypto_generichash(id, sizeof id, reinterpret_cast<const uint8_t*>(kContext), sizeof kContext - 1,
                     key.data(), key.size());
  char hex[2 * sizeof id + 1];
  sodium_bin2hex(hex, sizeof hex, id, sizeof id);
  return hex;
}

}  // namespace shardproof::cache
