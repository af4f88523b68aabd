// Tests that run the CLI get their own cache and daemon: a short temporary
// directory for SHARDPROOF_CACHE_DIR and XDG_RUNTIME_DIR (never the user's
// ~/.cache or runtime directory), and any daemon started in it is stopped
// at the end.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace shardproof::testing {

class IsolatedEnv {
 public:
  IsolatedEnv() {
    char tmpl[] = "/tmp/sp-t-XXXXXX";  // short: socket paths must fit 107 bytes
    root_ = mkdtemp(tmpl) ? tmpl : "/tmp";
    set("SHARDPROOF_CACHE_DIR", root_ + "/cache");
    set("XDG_RUNTIME_DIR", root_ + "/run");
    set("XDG_STATE_HOME", root_ + "/state");  // the cache's key
    // A daemon a crashed test leaves behind goes away on its own.
    set("SHARDPROOF_DAEMON_IDLE_TIMEOUT", "60");
    // Run inside a GitHub Actions step, verify would append to its summary.
    unsetenv("GITHUB_STEP_SUMMARY");
  }
  ~IsolatedEnv() {
    std::string stop = std::string("'") + SHARDPROOF_CLI + "' daemon stop >/dev/null 2>&1";
    if (std::system(stop.c_str()) != 0) {
      // Nothing was running; nothing to do.
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  IsolatedEnv(const IsolatedEnv&) = delete;
  IsolatedEnv& operator=(const IsolatedEnv&) = delete;

  const std::string& root() const { return root_; }
  std::string cache_dir() const { return root_ + "/cache"; }

 private:
  static void set(const char* name, const std::string& value) { setenv(name, value.c_str(), 1); }
  std::string root_;
};

}  // namespace shardproof::testing
