#include "cache/cache_location.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "engine/core/units.h"

namespace shardproof::cache {
namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

std::string home_directory() {
  std::string home = env("HOME");
  if (!home.empty()) return home;
  if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) return pw->pw_dir;
  return "";
}

std::string default_cache_dir() {
  // Absolute: a daemon runs from "/" and must find the same directory.
  if (std::string dir = env("SHARDPROOF_CACHE_DIR"); !dir.empty()) {
    std::error_code ec;
    std::filesystem::path absolute = std::filesystem::absolute(dir, ec);
    return ec ? dir : absolute.lexically_normal().string();
  }
  // The XDG spec: a relative XDG_CACHE_HOME is invalid and must be ignored.
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/')
    return xdg + "/shardproof";
  std::string home = home_directory();
  return home.empty() ? "" : home + "/.cache/shardproof";
}

uint64_t default_max_bytes() {
  if (std::optional<uint64_t> size = parse_size(env("SHARDPROOF_CACHE_MAX_SIZE"));
      size && *size > 0)
    return *size;
  return kDefaultMaxBytes;
}

}  // namespace shardproof::cache
