#include "cache/team_key.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace shardproof::cache {

std::string team_key_file_from_env() {
  const char* file = std::getenv("SHARDPROOF_CACHE_KEY_FILE");
  if (!file || !*file) return "";
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(file, ec);
  return ec ? file : absolute.lexically_normal().string();
}

std::optional<MacKey> load_team_key(const std::string& path, Status* status) {
  if (path.empty()) {
    *status = Status::error(
        "no team key: set SHARDPROOF_CACHE_KEY_FILE to a file of 32 secret "
        "bytes (mode 0600) that the team shares");
    return std::nullopt;
  }
  if (::access(path.c_str(), F_OK) != 0) {
    *status = Status::error("the team key " + path + " does not exist");
    return std::nullopt;
  }
  // Checks ownership and mode 0600 (no access for group or others) and size.
  Status s;
  std::optional<MacKey> key = load_or_create_key(path, &s);
  if (!key) *status = Status::error("the team key: " + s.message());
  return key;
}

}  // namespace shardproof::cache
