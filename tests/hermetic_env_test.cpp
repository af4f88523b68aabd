// Before any test runs: the cache and the daemon's runtime directory point
// into the build tree, never at the user's ~/.cache or runtime directory,
// whichever way the test binary is started (ctest, by hand, a debugger).
// Suites that run the CLI go further and take a directory of their own
// (tests/isolated_env.h).
#include <stdlib.h>

#include <string>

namespace {

const bool kHermetic = [] {
  const std::string home = SHARDPROOF_TEST_HOME;
  setenv("SHARDPROOF_CACHE_DIR", (home + "/cache").c_str(), 1);
  setenv("XDG_RUNTIME_DIR", (home + "/run").c_str(), 1);
  setenv("XDG_STATE_HOME", (home + "/state").c_str(), 1);
  setenv("SHARDPROOF_DAEMON_IDLE_TIMEOUT", "30", 1);
  // Never the team's shared cache (suites that test it start their own).
  unsetenv("SHARDPROOF_REMOTE_CACHE");
  return true;
}();

}  // namespace
