// The daemon end to end, through the real binary and its socket: a second
// verify solves nothing, a changed layer re-solves only its stages, two
// clients solve each stage once, kill -9 mid-verify loses nothing, hostile
// frames leave it serving, the state directory's permissions are checked,
// and the report is the same through the daemon and in process.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon/pid_lock.h"
#include "daemon/protocol.h"
#include "engine/format/plan_parser.h"
#include "engine/stage/canonical.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "tests/cli_runner.h"
#include "tests/isolated_env.h"
#include "tests/raw_client.h"

namespace shardproof {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kCli = SHARDPROOF_CLI;
const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";

struct CliRun {
  int code = -1;
  std::string out, err;
  json report() const { return json::parse(out, nullptr, false); }
};

std::string quote(const std::string& s) {
  return shardproof::testing::shell_quote(s);
}
std::string slurp(const fs::path& p) {
  return shardproof::testing::slurp_file(p);
}

// Distinct stage keys of a plan, computed by the engine directly.
std::set<std::string> stage_keys(const fs::path& plan) {
  ParseResult parsed = parse_plan_file(plan.string());
  std::set<std::string> keys;
  if (!parsed.plan) return keys;
  for (Stage& s : build_stages(*parsed.plan)) {
    reduce_stage(s);
    keys.insert(stage_key(s));
  }
  return keys;
}

// Without what may differ between two runs of the same plan.
json without_timing(json report) {
  report["stats"].erase("seconds");
  return report;
}
json without_stats(json report) {
  report.erase("stats");
  return report;
}

using shardproof::testing::RawClient;

class DaemonTest : public ::testing::Test {
 protected:
  CliRun run(const std::string& args) {
    static std::atomic<int> n{0};
    fs::path err = fs::path(env_.root()) / ("stderr-" + std::to_string(n++) + ".txt");
    shardproof::testing::CliResult r = shardproof::testing::run_cli(args, err);
    return CliRun{r.code, std::move(r.out), std::move(r.err)};
  }

  fs::path plan(const std::string& name, const std::string& args) {
    fs::path p = fs::path(env_.root()) / name;
    CliRun r = run("plan " + args + " -o " + quote(p.string()));
    EXPECT_EQ(r.code, 0) << r.err;
    return p;
  }

  CliRun verify(const fs::path& p, const std::string& flags = "") {
    return run("verify --format json " + flags + " " + quote(p.string()));
  }

  json status() {
    CliRun r = run("daemon status --format json");
    return json::parse(r.out, nullptr, false);
  }

  shardproof::testing::IsolatedEnv env_;
};

TEST_F(DaemonTest, SecondVerifySolvesNothingAndAnswersTheSame) {
  fs::path p = plan("bug.json",
                    "mlp --layers 4 --dp 2 --tp 2 --microbatches 2 --bug allreduce-mean-not-sum");
  CliRun cold = verify(p);
  ASSERT_EQ(cold.code, 1) << cold.out << cold.err;
  json first = cold.report();
  EXPECT_EQ(first["stats"]["cached"], 0);
  // Each distinct stage at most once (stages with one verdict key, e.g. one
  // layer on both dp ranks, share a proof).
  int64_t proved = status()["stages_proved"].get<int64_t>();
  EXPECT_GT(proved, 0);
  EXPECT_LE(proved, first["stats"]["unique_stages"].get<int64_t>()) << "each distinct stage once";

  CliRun warm = verify(p);
  ASSERT_EQ(warm.code, 1) << warm.err;
  json second = warm.report();
  EXPECT_EQ(second["stats"]["solved"], 0);
  EXPECT_EQ(second["stats"]["cached"], second["stats"]["unique_stages"]);
  EXPECT_EQ(without_stats(second), without_stats(first));
  EXPECT_EQ(status()["stages_proved"].get<int64_t>(), proved) << "the warm run proved something";

  // The same stages under another plan text: every stage from the stage cache.
  json renamed = json::parse(slurp(p));
  renamed["name"] = "same stages, another plan";
  fs::path q = fs::path(env_.root()) / "renamed.json";
  std::ofstream(q) << renamed.dump();
  CliRun stages = verify(q);
  ASSERT_EQ(stages.code, 1) << stages.err;
  json third = stages.report();
  EXPECT_EQ(third["stats"]["cached"], third["stats"]["unique_stages"]);
  EXPECT_EQ(third["findings"], first["findings"]);
  EXPECT_EQ(status()["stages_proved"].get<int64_t>(), proved);
}

TEST_F(DaemonTest, OneChangedLayerResolvesOnlyItsStages) {
  fs::path p = plan("base.json", "mlp --layers 6 --dp 2 --tp 2");
  ASSERT_EQ(verify(p).code, 0);
  // Layer 3's activation becomes silu, in both graphs alike: still equivalent.
  json changed = json::parse(slurp(p));
  int edits = 0;
  for (const char* graph : {"logical", "parallel"})
    for (json& op : changed[graph]["ops"]) {
      std::string name = op.value("name", "");
      if (op["op"] == "gelu" && name.find("l3.fwd.") != std::string::npos) {
        op["op"] = "silu";
        ++edits;
      }
    }
  ASSERT_GE(edits, 2);
  fs::path q = fs::path(env_.root()) / "changed.json";
  std::ofstream(q) << changed.dump(1);

  std::set<std::string> before = stage_keys(p), after = stage_keys(q);
  int64_t expected = 0;
  for (const std::string& k : after) expected += before.count(k) ? 0 : 1;
  ASSERT_GE(expected, 1);

  int64_t proved = status()["stages_proved"].get<int64_t>();
  CliRun r = verify(q);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  json stats = r.report()["stats"];
  int64_t unique = stats["unique_stages"].get<int64_t>();
  EXPECT_EQ(unique - stats["cached"].get<int64_t>(), expected) << stats.dump();
  EXPECT_LT(expected * 4, unique) << "one layer is a small part of the plan";
  EXPECT_EQ(status()["stages_proved"].get<int64_t>() - proved, expected);
}

// A mesh change through the daemon and its LMDB cache: tp 4 after tp 2
// takes the proofs of the stages that reduce alike (proof keys: counted as
// shared proofs, not cached), and a bug at tp 4 after the correct tp 2 is
// still found.
TEST_F(DaemonTest, AMeshChangeTakesProofsAndABugIsStillFound) {
  CliRun fresh = verify(plan("tp2.json", "mlp --layers 2 --tp 2"));
  ASSERT_EQ(fresh.code, 0) << fresh.out << fresh.err;
  EXPECT_EQ(fresh.report()["stats"]["shared_proofs"], 0) << fresh.out;
  CliRun changed = verify(plan("tp4.json", "mlp --layers 2 --tp 4"));
  ASSERT_EQ(changed.code, 0) << changed.out << changed.err;
  EXPECT_GT(changed.report()["stats"]["shared_proofs"].get<int64_t>(), 0) << changed.out;
  CliRun bug = verify(plan("bug.json", "mlp --layers 2 --tp 4 --dp 2 --bug drop-tp-allreduce"));
  EXPECT_EQ(bug.code, 1) << bug.out << bug.err;
  EXPECT_EQ(bug.report()["verdict"], "not-equivalent") << bug.out;
}

// The same plan path edited in place, as a developer tunes a plan: the
// daemon re-reads only the edited ops and carries every stage they do not
// reach over from its last verification (stats.reused), and answers as a
// verification from scratch does.
TEST_F(DaemonTest, AnEditedPlanReusesTheStagesItsEditDoesNotReach) {
  fs::path correct = plan("correct.json", "mlp --layers 6 --dp 2 --tp 2");
  fs::path buggy = plan("buggy.json", "mlp --layers 6 --dp 2 --tp 2 --bug allreduce-mean-not-sum");
  json base = json::parse(slurp(correct)), bug = json::parse(slurp(buggy));
  bug["name"] = base["name"];  // the bug's only trace is then in its ops
  bug["meta"] = base["meta"];
  fs::path p = fs::path(env_.root()) / "tuned.json";
  auto write = [&](const json& plan) { std::ofstream(p, std::ios::trunc) << plan.dump(1); };

  write(base);
  CliRun first = verify(p);
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_EQ(first.report()["stats"]["reused"], 0);

  write(bug);
  CliRun edit = verify(p);
  ASSERT_EQ(edit.code, 1) << edit.out << edit.err;
  json edited = edit.report();
  const int64_t stages = edited["stats"]["stages"].get<int64_t>();
  const int64_t reused = edited["stats"]["reused"].get<int64_t>();
  EXPECT_GT(reused, 0) << edited["stats"].dump();
  EXPECT_LT(reused, stages);
  CliRun scratch = verify(p, "--no-daemon --no-cache");
  ASSERT_EQ(scratch.code, 1) << scratch.err;
  json full = scratch.report();
  EXPECT_EQ(edited["findings"], full["findings"]);
  EXPECT_EQ(edited["stats"]["stages"], full["stats"]["stages"]);
  EXPECT_EQ(edited["stats"]["unique_stages"], full["stats"]["unique_stages"]);

  write(base);  // and back (its report comes from the cache)
  CliRun back = verify(p);
  EXPECT_EQ(back.code, 0) << back.out << back.err;

  // An edit is recognised by its bytes, whatever the file is called (the
  // pre-commit hook verifies staged copies under temporary paths): layer 3's
  // activation swapped in both graphs, under a new name.
  json tuned = base;
  for (const char* graph : {"logical", "parallel"})
    for (json& op : tuned[graph]["ops"])
      if (op["op"] == "gelu" && op.value("name", "").find("l3.fwd.") != std::string::npos)
        op["op"] = "silu";
  fs::path q = fs::path(env_.root()) / "tuned-copy.json";
  std::ofstream(q) << tuned.dump(1);
  CliRun copy = verify(q);
  ASSERT_EQ(copy.code, 0) << copy.out << copy.err;
  EXPECT_GT(copy.report()["stats"]["reused"].get<int64_t>(), 0);
  EXPECT_EQ(without_stats(copy.report()),
            without_stats(verify(q, "--no-daemon --no-cache").report()));
}

TEST_F(DaemonTest, TwoClientsAtOnceSolveEachStageOnce) {
  fs::path p = plan("big.json", "mlp --layers 16 --dp 2 --tp 2 --pp 2 --microbatches 2");
  // How many proofs one client needs, in a fresh cache.
  ASSERT_EQ(run("daemon start").code, 0);
  const fs::path cache = fs::path(status()["cache"].get<std::string>()).parent_path();
  ASSERT_EQ(verify(p).code, 0);
  const json alone = status()["stages_proved"];
  ASSERT_EQ(run("daemon stop").code, 0);
  fs::remove_all(cache);
  ASSERT_EQ(run("daemon start").code, 0);
  CliRun a, b;
  std::thread ta([&] { a = verify(p); });
  std::thread tb([&] { b = verify(p); });
  ta.join();
  tb.join();
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  json ra = a.report(), rb = b.report();
  EXPECT_EQ(without_stats(ra), without_stats(rb));
  json s = status();
  EXPECT_EQ(s["stages_proved"], alone) << s.dump(1);
  EXPECT_EQ(s["verifies"], 2);
}

TEST_F(DaemonTest, KilledMidVerifyThenTheNextVerifyAnswersTheSame) {
  fs::path p = plan("kill.json",
                    "mlp --layers 16 --dp 2 --tp 2 --pp 2 --microbatches 2 --bug "
                    "dp-grad-not-synced");
  CliRun reference = verify(p, "--no-cache");
  ASSERT_EQ(reference.code, 1) << reference.err;
  // The verify takes a tenth of a second: on a loaded machine the daemon
  // may finish it between our reading its first progress and the kill
  // landing (2 in 40 runs beside 4 busy loops). Such an attempt tests
  // nothing; it is made again on an empty cache, a few times.
  json s;
  bool killed_mid_verify = false;
  for (int attempt = 0; attempt < 5 && !killed_mid_verify; ++attempt) {
    if (attempt > 0) fs::remove_all(fs::path(s["cache"].get<std::string>()).parent_path());
    ASSERT_EQ(run("daemon start --jobs 1").code, 0);
    s = status();
    // Send the verify ourselves, so the kill lands after the first stage.
    RawClient client(s["socket"].get<std::string>());
    ASSERT_TRUE(client.connected());
    ASSERT_EQ(client.hello(s["build"])["type"], "hello");
    client.send(
        json{{"type", "verify"}, {"id", 1}, {"plan", {{"path", "kill.json"}, {"text", slurp(p)}}}}
            .dump() +
        "\n");
    json event = client.read();
    ASSERT_EQ(event["type"], "progress") << event.dump();
    ASSERT_LT(event["done"].get<int64_t>(), event["total"].get<int64_t>());
    ASSERT_EQ(kill(s["pid"].get<int>(), SIGKILL), 0);
    killed_mid_verify = true;
    for (json m = client.read(); !m.is_discarded(); m = client.read())
      killed_mid_verify &= m["type"] == "progress";
    // Our connection closes while the kernel is still tearing the process
    // down, its listening socket possibly still open: wait until it is gone
    // (or a zombie), as a user who runs verify after the kill would be.
    const std::string proc = "/proc/" + std::to_string(s["pid"].get<int>()) + "/status";
    for (int i = 0; i < 500; ++i) {
      std::ifstream status_file(proc);
      std::string line;
      bool gone = !status_file;
      while (!gone && std::getline(status_file, line))
        if (line.rfind("State:", 0) == 0) gone = line.find('Z') != std::string::npos;
      if (gone) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_TRUE(killed_mid_verify) << "the daemon finished before it was killed, 5 times";

  CliRun after = verify(p);
  ASSERT_EQ(after.code, 1) << after.err;
  EXPECT_EQ(without_stats(after.report()), without_stats(reference.report()));
  EXPECT_EQ(after.err.find("warning"), std::string::npos) << after.err;
  EXPECT_NE(status()["pid"], s["pid"]) << "a new daemon answered";
  CliRun stats = run("cache stats --format json");
  ASSERT_EQ(stats.code, 0) << stats.err;
  EXPECT_EQ(stats.err.find("warning"), std::string::npos) << "the store must open cleanly";
  EXPECT_GT(json::parse(stats.out)["entries"].get<int64_t>(), 0);
}

TEST_F(DaemonTest, HostileFramesLeaveTheDaemonServing) {
  ASSERT_EQ(run("daemon start --max-frame 64K").code, 0);
  json s = status();
  std::string socket = s["socket"], build = s["build"];
  auto serving = [&] {
    RawClient c(socket);
    if (!c.connected() || c.hello(build)["type"] != "hello") return false;
    c.send(R"({"type":"status","id":"s"})"
           "\n");
    return c.read()["type"] == "result";
  };
  {
    RawClient c(socket);  // garbage before hello: an error, then hello still works
    c.send("this is not json\n");
    json e = c.read();
    EXPECT_EQ(e["code"], "malformed") << e.dump();
    c.send(std::string("\x00\xff\xfe{]\n", 6));
    EXPECT_EQ(c.read()["code"], "malformed");
    EXPECT_EQ(c.hello(build)["type"], "hello");
    c.send(R"({"type":"status"})"
           "\n");
    EXPECT_EQ(c.read()["code"], "missing-id");
    c.send(R"({"type":"frobnicate","id":2})"
           "\n");
    EXPECT_EQ(c.read()["code"], "unknown-request");
    c.send(R"({"type":"verify","id":3,"plan":{"text":42}})"
           "\n");
    EXPECT_EQ(c.read()["code"], "bad-request");
    c.send(
        R"({"type":"verify","id":4,"plan":{"path":"x","text":"{\"format\":\"shardproof-plan/1\",\"logical\":\"/etc/passwd\",\"parallel\":{}}"}})"
        "\n");
    EXPECT_EQ(c.read()["code"], "graph-reference") << "the daemon reads no user files";
  }
  {
    RawClient c(socket);  // oversized: refused and dropped
    c.send(std::string(100 << 10, 'x'));
    EXPECT_EQ(c.read()["code"], "frame-too-large");
    EXPECT_TRUE(c.read().is_discarded());
  }
  {
    RawClient c(socket);  // no hello first: refused and dropped
    c.send(R"({"type":"status","id":1})"
           "\n");
    EXPECT_EQ(c.read()["code"], "hello-required");
    EXPECT_TRUE(c.read().is_discarded());
  }
  {
    RawClient c(socket);  // another build
    EXPECT_EQ(c.hello("0.0.0-old")["code"], "version-mismatch");
  }
  {
    RawClient c(socket);  // half a request, then gone
    c.hello(build);
    c.send(R"({"type":"verify","id":1,"plan":{"text":")");
  }
  {
    RawClient c(socket);  // gone in the middle of a verify
    c.hello(build);
    json plan = json::parse(slurp(kExamples / "tp2-ffn.json"));
    c.send(json{{"type", "verify"}, {"id", 1}, {"plan", {{"path", "p"}, {"text", plan.dump()}}}}
               .dump() +
           "\n");
  }
  EXPECT_TRUE(serving());
  CliRun r = verify(kExamples / "tp2-ffn-bug-mean.json");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_EQ(status()["pid"], s["pid"]) << "the same daemon, still alive";
}

TEST_F(DaemonTest, UnsafeStateDirectoryIsRefused) {
  fs::path state = fs::path(env_.root()) / "run" / "shardproof";
  fs::create_directories(state);
  fs::permissions(state, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
  CliRun start = run("daemon start");
  EXPECT_EQ(start.code, 4);
  EXPECT_NE(start.err.find("other users can access it"), std::string::npos) << start.err;
  // verify still answers, in process, and says why.
  CliRun r = verify(kExamples / "tp2-ffn.json");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("not using the daemon"), std::string::npos) << r.err;
}

TEST_F(DaemonTest, ReportIsTheSameThroughTheDaemonAndInProcess) {
  fs::path bug = kExamples / "tp2-ffn-bug-mean.json";
  fs::path refs = kExamples / "dp2-sgd.json";  // references a graph file
  for (const fs::path& p : {bug, refs}) {
    SCOPED_TRACE(p.string());
    CliRun daemon_cold = verify(p);
    CliRun daemon_warm = verify(p);
    CliRun in_process = verify(p, "--no-daemon");
    CliRun no_cache = verify(p, "--no-cache");
    EXPECT_EQ(daemon_cold.code, in_process.code);
    EXPECT_EQ(daemon_cold.code, no_cache.code);
    EXPECT_EQ(without_timing(daemon_warm.report()), without_timing(in_process.report()));
    EXPECT_EQ(without_stats(daemon_cold.report()), without_stats(no_cache.report()));
    // Text too, with the timing masked.
    std::regex seconds("[0-9]+\\.[0-9]+ s\\)");
    CliRun text_daemon = run("verify " + quote(p.string()));
    CliRun text_local = run("verify --no-daemon " + quote(p.string()));
    EXPECT_EQ(std::regex_replace(text_daemon.out, seconds, "s)"),
              std::regex_replace(text_local.out, seconds, "s)"));
  }
  // An invalid plan names the same file, line and column either way.
  fs::path bad = fs::path(env_.root()) / "bad.json";
  std::ofstream(bad) << "{\"format\": \"shardproof-plan/1\",\n \"logical\": 7}";
  EXPECT_EQ(verify(bad).out, verify(bad, "--no-daemon").out);
  EXPECT_EQ(verify(bad).code, 2);
}

TEST_F(DaemonTest, DaemonCommandsStartStopRestart) {
  EXPECT_EQ(run("daemon status").code, 1);
  CliRun start = run("daemon start");
  ASSERT_EQ(start.code, 0) << start.err;
  EXPECT_NE(start.out.find("started"), std::string::npos) << start.out;
  EXPECT_NE(run("daemon start").out.find("already running"), std::string::npos);
  int pid = status()["pid"];
  ASSERT_EQ(run("daemon restart").code, 0);
  EXPECT_NE(status()["pid"], pid);
  CliRun second_run = run("daemon run");  // a second daemon on the same socket refuses
  EXPECT_EQ(second_run.code, 1) << second_run.err;
  EXPECT_NE(second_run.err.find("already running"), std::string::npos) << second_run.err;
  CliRun stop = run("daemon stop");
  EXPECT_EQ(stop.code, 0);
  EXPECT_NE(stop.out.find("stopped"), std::string::npos);
  EXPECT_EQ(run("daemon status").code, 1);
  EXPECT_NE(run("daemon stop").out.find("not running"), std::string::npos);
}

TEST_F(DaemonTest, IdleDaemonExits) {
  ASSERT_EQ(run("daemon start --idle-timeout 1").code, 0);
  std::string socket = status()["socket"];
  std::string lock = socket.substr(0, socket.size() - 5) + ".lock";
  ASSERT_GT(daemon::lock_holder(lock), 0);
  // Watched through its lock, which goes with the process; asking it would
  // count as activity.
  for (int i = 0; i < 50 && daemon::lock_holder(lock) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(daemon::lock_holder(lock), 0) << "still running after 5 s";
}

TEST_F(DaemonTest, CacheCommands) {
  ASSERT_EQ(verify(kExamples / "tp2-ffn.json", "--no-daemon").code, 0);
  CliRun stats = run("cache stats --format json");
  ASSERT_EQ(stats.code, 0) << stats.err;
  json j = json::parse(stats.out);
  EXPECT_GT(j["stage_entries"].get<int64_t>(), 0);
  EXPECT_EQ(j["plan_entries"], 1);
  EXPECT_GT(j["misses"].get<int64_t>(), 0);
  for (const char* key : {"path", "entries", "bytes", "hits", "hit_rate"})
    EXPECT_TRUE(j.contains(key));
  EXPECT_NE(run("cache stats").out.find("hit rate"), std::string::npos);
  EXPECT_EQ(run("cache gc --max-size 12X").code, 2);
  EXPECT_EQ(run("cache gc --max-age soon").code, 2);
  CliRun gc = run("cache gc --max-size 0");
  EXPECT_EQ(gc.code, 0) << gc.err;
  EXPECT_NE(gc.out.find("kept 0"), std::string::npos) << gc.out;
  ASSERT_EQ(verify(kExamples / "tp2-ffn.json", "--no-daemon").code, 0);
  EXPECT_EQ(run("cache clear").code, 0);
  EXPECT_EQ(json::parse(run("cache stats --format json").out)["entries"], 0);
}

}  // namespace
}  // namespace shardproof
