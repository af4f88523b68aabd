#include "daemon/stale_files.h"

#include <filesystem>

#include "daemon/pid_lock.h"

namespace shardproof::daemon {

namespace fs = std::filesystem;

int remove_stale_files(const DaemonPaths& own, int64_t min_age_seconds) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  auto fresh = [&](const fs::path& p) {
    std::error_code e;
    auto t = fs::last_write_time(p, e);
    return !e && now - t < std::chrono::seconds(min_age_seconds);
  };
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(own.dir, ec)) {
    const fs::path& lock = entry.path();
    const std::string name = lock.filename().string();
    if (name.rfind("sp-", 0) != 0 || lock.extension() != ".lock" || lock == own.lock) continue;
    fs::path stem = lock;
    stem.replace_extension();
    const fs::path group[] = {lock, fs::path(stem.string() + ".sock"),
                              fs::path(stem.string() + ".log")};
    bool recent = false;
    for (const fs::path& p : group) recent = recent || fresh(p);
    if (recent || lock_holder(lock.string()) != 0) continue;
    for (const fs::path& p : group) fs::remove(p, ec);
    ++removed;
  }
  return removed;
}

}  // namespace shardproof::daemon
