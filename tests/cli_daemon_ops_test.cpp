// A daemon you can see into and stop (issue 26): `daemon status` shows its
// log, memory and running requests; `daemon cancel` makes a running verify
// unknown (never equivalent); one log line per finished request; the files
// of daemons long gone are removed at start.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/config.h"
#include "daemon/service.h"
#include "daemon/stale_files.h"
#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using shardproof::testing::CliResult;
using shardproof::testing::shell_quote;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliDaemonOpsTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliDaemonOpsTest() : ScratchDirTest("shardproof_cli_daemon_ops_") {}

  CliResult run(const std::string& args) {
    return shardproof::testing::run_cli(args, dir_ / "stderr.txt");
  }

  shardproof::testing::IsolatedEnv env_;
};

// Cancelled from its own first progress event: the rest of its stages are
// not solved, the answer is unknown and says why; the table shows it while
// it runs and forgets it after.
TEST_F(CliDaemonOpsTest, CancelMakesARunningVerifyUnknown) {
  ASSERT_EQ(run("plan mlp -o " + shell_quote((dir_ / "mlp.json").string())).code, 0);
  shardproof::daemon::DaemonConfig config;
  config.jobs = 1;
  shardproof::daemon::Service service(config);
  shardproof::daemon::VerifyRequest request;
  request.path = "mlp.json";
  request.text = shardproof::testing::slurp_file(dir_ / "mlp.json");
  request.progress = true;

  json running, final;
  int cancelled = -1;
  service.verify(1, request, [&](const json& m, bool last) {
    if (last) {
      final = m;
    } else if (cancelled < 0) {
      running = service.status()["requests"];
      cancelled = service.cancel(0);
    }
  });
  EXPECT_EQ(cancelled, 1);
  ASSERT_EQ(running.size(), 1u) << running.dump();
  EXPECT_EQ(running[0]["plan"], "mlp.json");
  EXPECT_EQ(running[0]["phase"], "verifying");
  EXPECT_GE(running[0]["total"].get<int>(), 2);
  ASSERT_EQ(final["type"], "result") << final.dump();
  EXPECT_EQ(final["result"]["verdict"], "unknown") << final.dump();
  EXPECT_TRUE(has(final.dump(), "cancelled by `shardproof daemon cancel`")) << final.dump();
  EXPECT_TRUE(service.status()["requests"].empty());

  // The same plan, not cancelled: equivalent (the cancel did not stick).
  service.verify(2, request, [&](const json& m, bool last) {
    if (last) final = m;
  });
  EXPECT_EQ(final["result"]["verdict"], "equivalent") << final.dump();
}

TEST_F(CliDaemonOpsTest, StatusShowsLogMemoryAndRequestsAndLogsEachRequest) {
  ASSERT_EQ(run("daemon start").code, 0);
  std::string plan = (kExamples / "tp2-ffn.json").string();
  ASSERT_EQ(run("verify " + shell_quote(plan)).code, 0);

  CliResult r = run("daemon status --json");
  ASSERT_EQ(r.code, 0) << r.err;
  json s = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_GT(s.value("rss_bytes", int64_t{0}), 0);
  EXPECT_TRUE(s["requests"].is_array());
  std::string log = s.value("log", std::string());
  ASSERT_FALSE(log.empty()) << r.out;

  r = run("daemon status");
  EXPECT_TRUE(has(r.out, "log: " + log)) << r.out;
  EXPECT_TRUE(has(r.out, "memory: ")) << r.out;

  std::string text = shardproof::testing::slurp_file(log);
  EXPECT_TRUE(has(text, "request 1: " + plan + ": equivalent in ")) << text;
  EXPECT_TRUE(has(text, " distinct: ")) << text;
  EXPECT_TRUE(has(text, " cached\n")) << text;

  r = run("daemon cancel 12345");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "cancelled 0 requests")) << r.out;
  EXPECT_EQ(run("daemon cancel").code, 0);
  run("daemon stop");
  EXPECT_EQ(run("daemon cancel").code, 1);  // nothing to talk to
}

TEST_F(CliDaemonOpsTest, StaleFilesOfGoneDaemonsAreRemoved) {
  fs::path state = dir_ / "state";
  fs::create_directories(state);
  auto touch = [&](const std::string& name, bool old) {
    fs::path p = state / name;
    std::ofstream(p) << "x";
    if (old) fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(48));
    return p;
  };
  fs::path gone_lock = touch("sp-1111.lock", true);
  fs::path gone_log = touch("sp-1111.log", true);
  fs::path recent_lock = touch("sp-2222.lock", true);
  fs::path recent_log = touch("sp-2222.log", false);  // written a moment ago: may be starting
  fs::path other = touch("notes.txt", true);
  shardproof::daemon::DaemonPaths own;
  own.dir = state.string();
  own.lock = touch("sp-3333.lock", true).string();
  EXPECT_EQ(shardproof::daemon::remove_stale_files(own), 1);
  EXPECT_FALSE(fs::exists(gone_lock));
  EXPECT_FALSE(fs::exists(gone_log));
  EXPECT_TRUE(fs::exists(recent_lock));
  EXPECT_TRUE(fs::exists(recent_log));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(own.lock));
}

}  // namespace
