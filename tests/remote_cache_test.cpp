// The shared stage cache on Redis (issue 25), against a real redis-server
// on a Unix socket in a temporary directory: two machines share proofs, a
// record without the team key's MAC is never believed, and a remote that
// stops, stalls, is slow (tests/delay_proxy.h) or is full costs one warning
// while the run goes on locally.
// Skipped (with a message) only where redis-server is not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/cached_stage_store.h"
#include "cache/cached_verify.h"
#include "cache/redis_client.h"
#include "cache/remote_store.h"
#include "cache/verdict_cache.h"
#include "planner/planner.h"
#include "tests/cli_runner.h"
#include "tests/delay_proxy.h"
#include "tests/isolated_env.h"
#include "tests/planner_support.h"

namespace shardproof::cache {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool have_redis_server() {
  return std::system("command -v redis-server >/dev/null 2>&1") == 0;
}

// One redis-server on a Unix socket (no TCP port, nothing saved), stopped
// with the test.
class RedisServer {
 public:
  RedisServer(const std::string& dir, std::vector<std::string> extra = {}) : dir_(dir) {
    socket_ = dir + "/redis.sock";
    std::vector<std::string> args = {"redis-server",
                                     "--port",
                                     "0",
                                     "--unixsocket",
                                     socket_,
                                     "--unixsocketperm",
                                     "700",
                                     "--save",
                                     "",
                                     "--appendonly",
                                     "no",
                                     "--dir",
                                     dir,
                                     "--logfile",
                                     dir + "/redis.log"};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    for (int i = 0; i < 200 && !ready(); ++i) std::this_thread::sleep_for(25ms);
  }
  ~RedisServer() { stop(); }

  bool ready() {
    std::string why;
    long long keys = 0;
    auto c = connect(&why);
    return c && c->probe(&keys, &why) == RedisClient::Result::Ok;
  }
  std::unique_ptr<RedisClient> connect(std::string* why) {
    RedisAddress a;
    a.unix_path = socket_;
    return RedisClient::connect(a, 1000ms, why);
  }
  long long keys() {
    std::string why;
    long long n = -1;
    auto c = connect(&why);
    if (c) c->probe(&n, &why);
    return n;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void pause() { kill(pid_, SIGSTOP); }
  std::string url() const { return "unix://" + socket_; }
  const std::string& socket() const { return socket_; }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
};

// A small transformer (one layer, tp 2) with stages the solver must decide
// (an MLP's are all closed by normalisation); `indent` changes the text,
// not the stages.
std::string plan_text(const std::string& bug = "", int indent = -1) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 2, 1, 1);
  c.bug = bug;
  return planner::generate_plan("llama3-tiny", c).dump(indent);
}

// A bug of the planner that applies to plan_text's configuration.
std::string some_bug() {
  for (const planner::BugInfo& bug : planner::list_bugs("llama3-tiny")) {
    try {
      plan_text(bug.name);
      return bug.name;
    } catch (const std::invalid_argument&) {
    }
  }
  return "";
}

std::string entry_key(EntryKind kind, const std::string& hex) {
  std::optional<Hash128> hash = parse_hash128(hex);
  std::string key(1, static_cast<char>(kind));
  key.append(reinterpret_cast<const char*>(hash->data()), hash->size());
  return key;
}

class RemoteCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_redis_server()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh)";
    char tmpl[] = "/tmp/sp-redis-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    team_key_ = write_key("team.key");
  }
  void TearDown() override {
    server_.reset();
    if (!root_.empty()) fs::remove_all(root_);
  }

  std::string write_key(const std::string& name) {
    fs::create_directories(root_ + "/keys");
    fs::permissions(root_ + "/keys", fs::perms::owner_all, fs::perm_options::replace);
    std::string path = root_ + "/keys/" + name;
    MacKey key;
    randombytes_buf(key.data(), key.size());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<char*>(key.data()), key.size());
    chmod(path.c_str(), 0600);
    return path;
  }
  void start(std::vector<std::string> extra = {}) {
    server_ = std::make_unique<RedisServer>(root_, std::move(extra));
    ASSERT_TRUE(server_->ready()) << "redis-server did not start";
  }
  RemoteSettings remote(const std::string& key_file, RemoteMode mode = RemoteMode::ReadWrite) {
    RemoteSettings s;
    s.url = server_->url();
    s.key_file = key_file;
    s.mode = mode;
    return s;
  }
  // A machine: its own cache directory and per-user key, and the remote.
  std::unique_ptr<VerdictCache> machine(const std::string& name, const RemoteSettings& r) {
    CacheOptions o;
    o.dir = root_ + "/" + name;
    o.key_file = root_ + "/state-" + name + "/cache.key";
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    o.remote = r;
    Status status;
    auto c = VerdictCache::open(o, &status);
    EXPECT_TRUE(c) << status.message();
    return c;
  }
  Report verify(VerdictCache& c, const std::string& text,
                std::function<void(const VerifyProgress&)> progress = {}) {
    CachedStageStore store(c);
    VerifyOptions o;
    o.jobs = 2;
    o.store = &store;
    o.progress = std::move(progress);
    Report r = verify_with_cache("plan.json", text, o, &c);
    c.flush();
    return r;
  }
  CacheStats stats(VerdictCache& c) {
    CacheStats s;
    EXPECT_TRUE(c.stats(&s).ok());
    return s;
  }
  int warnings_with(const std::string& text) {
    int n = 0;
    for (const std::string& w : warnings_) n += w.find(text) != std::string::npos;
    return n;
  }

  std::string root_, team_key_;
  std::unique_ptr<RedisServer> server_;
  std::vector<std::string> warnings_;
};

TEST(RedisUrl, ParsesTheTwoForms) {
  std::string why;
  auto tcp = parse_redis_url("redis://:s3cret@cache.internal:6380/2", &why);
  ASSERT_TRUE(tcp) << why;
  EXPECT_EQ(tcp->host, "cache.internal");
  EXPECT_EQ(tcp->port, 6380);
  EXPECT_EQ(tcp->db, 2);
  EXPECT_EQ(tcp->password, "s3cret");
  auto plain = parse_redis_url("redis://localhost", &why);
  ASSERT_TRUE(plain) << why;
  EXPECT_EQ(plain->port, 6379);
  EXPECT_EQ(plain->db, 0);
  auto sock = parse_redis_url("unix:///run/redis/redis.sock?db=3", &why);
  ASSERT_TRUE(sock) << why;
  EXPECT_EQ(sock->unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(sock->db, 3);
  for (const char* bad : {"http://x", "redis://", "redis://h:0", "redis://h:99999", "redis://h/x",
                          "unix://relative.sock", "unix:///s?db=x"})
    EXPECT_FALSE(parse_redis_url(bad, &why)) << bad;
}

TEST_F(RemoteCacheTest, SecondMachineProvesNothingTheFirstProved) {
  start();
  auto a = machine("a", remote(team_key_));
  Report first = verify(*a, plan_text());
  ASSERT_EQ(first.verdict, Verdict::Equivalent) << report_to_text(first);
  ASSERT_GT(first.stats.solved, 0);
  EXPECT_GT(stats(*a).remote.writes, 0u);

  // Other text (so no stored plan report), the same stages: all from Redis.
  auto b = machine("b", remote(team_key_));
  Report second = verify(*b, plan_text("", 2));
  EXPECT_EQ(second.verdict, Verdict::Equivalent) << report_to_text(second);
  EXPECT_EQ(second.stats.solved, 0);
  EXPECT_EQ(second.stats.cached, second.stats.unique_stages);
  CacheStats sb = stats(*b);
  EXPECT_EQ(sb.remote.hits, static_cast<uint64_t>(second.stats.unique_stages));
  EXPECT_EQ(sb.remote.rejected, 0u);
  EXPECT_EQ(sb.remote.errors, 0u);
  // The hits were copied locally: b answers them without Redis now.
  EXPECT_GE(sb.stage_entries, second.stats.unique_stages);
  server_->stop();
  Report local = verify(*b, plan_text("", 4));
  EXPECT_EQ(local.verdict, Verdict::Equivalent);
  EXPECT_EQ(local.stats.solved, 0);
  EXPECT_EQ(warnings_with("did not answer"), 1);  // asked once, for the plan's report
}

TEST_F(RemoteCacheTest, ForgedRecordsAreReprovedNeverTrusted) {
  start();
  std::string bug = some_bug();
  ASSERT_FALSE(bug.empty());
  // A runner with another key fills Redis: nothing it wrote is believed.
  auto forger = machine("forger", remote(write_key("other.key")));
  Report good = verify(*forger, plan_text());
  ASSERT_EQ(good.verdict, Verdict::Equivalent);
  // And it plants "equivalent" as the report of the buggy plan.
  std::string good_text = plan_text(), bug_text = plan_text(bug);
  PlanIdentity good_id = plan_identity(good_text), bug_id = plan_identity(bug_text);
  std::string why, stored;
  auto redis = server_->connect(&why);
  ASSERT_TRUE(redis) << why;
  ASSERT_EQ(redis->get(remote_key(entry_key(EntryKind::Plan, good_id.key)), &stored, &why),
            RedisClient::Result::Ok);
  Status ignored;
  MacKey forger_key = *load_or_create_key(root_ + "/keys/other.key", &ignored);
  std::optional<Record> report =
      decode_record(stored, forger_key, entry_key(EntryKind::Plan, good_id.key));
  ASSERT_TRUE(report);
  report->digest = *parse_hash128(bug_id.digest);
  std::string bug_key = entry_key(EntryKind::Plan, bug_id.key);
  ASSERT_EQ(redis->set(remote_key(bug_key), encode_record(*report, forger_key, bug_key), &why),
            RedisClient::Result::Ok);

  auto b = machine("b", remote(team_key_));
  Report reproved = verify(*b, good_text);
  EXPECT_EQ(reproved.verdict, Verdict::Equivalent);
  EXPECT_GT(reproved.stats.solved, 0);  // the forger's stage records: re-proved
  EXPECT_EQ(reproved.stats.cached, 0);
  Report refuted = verify(*b, bug_text);
  EXPECT_EQ(refuted.verdict, Verdict::NotEquivalent) << report_to_text(refuted);
  CacheStats sb = stats(*b);
  EXPECT_GT(sb.remote.rejected, 1u);
  EXPECT_EQ(sb.remote.hits, 0u);
  EXPECT_EQ(warnings_with("fail authentication"), 1);

  // A record altered in Redis after a teammate wrote it: rejected too.
  ASSERT_EQ(redis->get(remote_key(entry_key(EntryKind::Plan, good_id.key)), &stored, &why),
            RedisClient::Result::Ok);  // now b's, under the team key
  stored.back() ^= 1;
  ASSERT_EQ(redis->set(remote_key(entry_key(EntryKind::Plan, good_id.key)), stored, &why),
            RedisClient::Result::Ok);
  auto c = machine("c", remote(team_key_));
  EXPECT_EQ(verify(*c, good_text).verdict, Verdict::Equivalent);
  EXPECT_EQ(stats(*c).remote.rejected, 1u);
}

TEST_F(RemoteCacheTest, WithoutTheTeamKeyTheRemoteIsNotUsed) {
  start();
  auto a = machine("a", remote(""));
  EXPECT_EQ(a->remote(), nullptr);
  EXPECT_EQ(warnings_with("SHARDPROOF_CACHE_KEY_FILE is not set"), 1);
  chmod(team_key_.c_str(), 0644);  // a key others can read is no secret
  auto b = machine("b", remote(team_key_));
  EXPECT_EQ(b->remote(), nullptr);
  EXPECT_EQ(verify(*b, plan_text()).verdict, Verdict::Equivalent);
  EXPECT_EQ(server_->keys(), 0);
}

TEST_F(RemoteCacheTest, ReadOnlyRunnersReadButNeverWrite) {
  start();
  auto a = machine("a", remote(team_key_));
  verify(*a, plan_text());
  long long before = server_->keys();
  ASSERT_GT(before, 0);
  auto fork_pr = machine("fork", remote(team_key_, RemoteMode::ReadOnly));
  EXPECT_EQ(verify(*fork_pr, plan_text("", 2)).stats.solved, 0);
  EXPECT_EQ(verify(*fork_pr, plan_text(some_bug())).verdict, Verdict::NotEquivalent);
  EXPECT_EQ(server_->keys(), before);
  EXPECT_EQ(stats(*fork_pr).remote.writes, 0u);
}

TEST_F(RemoteCacheTest, RedisStoppedMidRunGoesOnLocally) {
  start();
  auto a = machine("a", remote(team_key_));
  bool stopped = false;
  Report r = verify(*a, plan_text(some_bug()), [&](const VerifyProgress&) {
    if (!stopped) server_->stop();
    stopped = true;
  });
  ASSERT_TRUE(stopped);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << report_to_text(r);
  EXPECT_EQ(warnings_with("did not answer"), 1);
  EXPECT_EQ(stats(*a).remote.errors, 1u);
  // The local tier kept everything: a second run solves nothing.
  EXPECT_EQ(verify(*a, plan_text(some_bug(), 2)).stats.solved, 0);
}

TEST_F(RemoteCacheTest, StalledRedisCostsOneTimeout) {
  start();
  server_->pause();  // accepts connections, answers nothing
  auto a = machine("a", remote(team_key_));
  auto start_time = std::chrono::steady_clock::now();
  Report r = verify(*a, plan_text());
  auto elapsed = std::chrono::steady_clock::now() - start_time;
  EXPECT_EQ(r.verdict, Verdict::Equivalent);
  EXPECT_GT(r.stats.solved, 0);
  // One timeout, then the remote is left alone: not one per stage.
  EXPECT_EQ(warnings_with("did not answer"), 1);
  EXPECT_EQ(stats(*a).remote.errors, 1u);
  EXPECT_EQ(stats(*a).remote.requests, 0u);
  EXPECT_LT(elapsed, 60s);  // a hang guard, not a speed target
}

// A remote far slower than its deadline (a proxy holds every chunk 2 s;
// the default deadline is 250 ms): a process waits for it once, one
// deadline, says so once, counts one error, leaves it alone and gets the
// right verdicts.
TEST_F(RemoteCacheTest, SlowRedisCostsOneDeadlineOnce) {
  start();
  testing::DelayProxy proxy(server_->socket(), 2s);
  ASSERT_NE(proxy.port(), 0) << "the proxy could not listen on loopback";
  RemoteSettings slow = remote(team_key_);
  slow.url = proxy.url();
  ASSERT_EQ(slow.timeout, 250ms);
  auto a = machine("a", slow);

  // First a plan with nothing to solve (an MLP's stages close by
  // normalisation): its time is the remote's. One deadline, where each of
  // its lookups and writes (two per stage) would take the proxy's 4 s round
  // trip if the deadline were not kept, or 250 ms if a failure were not
  // remembered.
  auto start_time = std::chrono::steady_clock::now();
  Report mlp = verify(*a, planner::generate_plan("mlp", testing::mlp_config(1, 1, 2, 1, 1)).dump());
  auto elapsed = std::chrono::steady_clock::now() - start_time;
  ASSERT_LT(elapsed, 1500ms) << "the slow remote cost more than one deadline";
  EXPECT_GE(elapsed, 200ms) << "the remote was not waited for";
  EXPECT_EQ(mlp.verdict, Verdict::Equivalent) << report_to_text(mlp);
  EXPECT_EQ(warnings_with("did not answer"), 1);

  // Then a plan to prove: the remote is left alone (not asked, not said
  // again), every stage is proved locally.
  Report r = verify(*a, plan_text());
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << report_to_text(r);
  EXPECT_GT(r.stats.solved, 0);
  EXPECT_EQ(warnings_with("did not answer"), 1);
  CacheStats s = stats(*a);
  EXPECT_EQ(s.remote.errors, 1u);
  EXPECT_EQ(s.remote.requests, 0u);
  EXPECT_EQ(s.remote.hits + s.remote.misses + s.remote.writes, 0u);

  // `cache stats` asks whether it answers: no, within the deadline too.
  long long keys = -1;
  double ping_ms = 0;
  std::string why;
  start_time = std::chrono::steady_clock::now();
  EXPECT_FALSE(a->remote()->probe(&keys, &ping_ms, &why));
  EXPECT_LT(std::chrono::steady_clock::now() - start_time, 1500ms);
  EXPECT_FALSE(why.empty());
}

// A remote slower than usual but within its deadline (a proxy holds every
// chunk 100 ms: a round trip of 200 ms or more; a 1 s deadline) is used as
// usual: what one machine wrote, another reads through it as a hit (the
// plan's report: one round trip; a proxied lookup per stage would make
// this test slow, and stages are shared in the tests above).
TEST_F(RemoteCacheTest, SlowButInTimeRedisStillShares) {
  start();
  auto a = machine("a", remote(team_key_));
  Report first = verify(*a, plan_text(some_bug()));
  ASSERT_EQ(first.verdict, Verdict::NotEquivalent) << report_to_text(first);
  ASSERT_GT(stats(*a).remote.writes, 0u);

  testing::DelayProxy proxy(server_->socket(), 100ms);
  ASSERT_NE(proxy.port(), 0) << "the proxy could not listen on loopback";
  RemoteSettings slow = remote(team_key_);
  slow.url = proxy.url();
  slow.timeout = 1s;
  auto b = machine("b", slow);
  Report second = verify(*b, plan_text(some_bug()));
  EXPECT_EQ(second.verdict, Verdict::NotEquivalent) << report_to_text(second);
  EXPECT_EQ(second.stats.solved, 0);
  CacheStats sb = stats(*b);
  EXPECT_EQ(sb.remote.hits, 1u);
  EXPECT_EQ(sb.remote.errors, 0u);
  EXPECT_EQ(warnings_with("did not answer"), 0);
  // Through the proxy indeed: the round trip took its two delays.
  ASSERT_EQ(sb.remote.requests, 1u);
  EXPECT_GE(sb.remote.latency_us, 200'000u);
}

TEST_F(RemoteCacheTest, FullRedisRefusesWritesRunStaysCorrect) {
  // A limit below what an empty server uses: every write is refused, and
  // stays so (filling a 1 MB limit left room again once the filler's
  // buffers were freed, and a run's small writes went through).
  start({"--maxmemory", "1", "--maxmemory-policy", "noeviction"});
  std::string why;
  auto redis = server_->connect(&why);
  ASSERT_TRUE(redis) << why;
  ASSERT_NE(redis->set("probe", "x", &why), RedisClient::Result::Ok) << "maxmemory did not apply";
  auto a = machine("a", remote(team_key_));
  Report r = verify(*a, plan_text(some_bug()));
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent);
  EXPECT_EQ(warnings_with("refused a write"), 1);
  CacheStats s = stats(*a);
  EXPECT_EQ(s.remote.writes, 0u);
  EXPECT_EQ(s.remote.errors, 1u);
  EXPECT_GT(s.remote.misses, 0u);  // reads went on
}

// The CLI takes the remote from the environment, in process as the daemon
// does (both open the cache the same way), and `cache stats` shows it.
TEST_F(RemoteCacheTest, CliSharesThroughTheEnvironment) {
  start();
  std::ofstream(root_ + "/plan.json") << plan_text();
  std::ofstream(root_ + "/renamed.json") << plan_text("", 2);
  const std::string saved_dir = std::getenv("SHARDPROOF_CACHE_DIR");
  setenv("SHARDPROOF_REMOTE_CACHE", server_->url().c_str(), 1);
  setenv("SHARDPROOF_CACHE_KEY_FILE", team_key_.c_str(), 1);
  auto run = [&](const std::string& machine, const std::string& args) {
    setenv("SHARDPROOF_CACHE_DIR", (root_ + "/" + machine).c_str(), 1);
    return testing::run_cli(args, root_ + "/err.txt");
  };
  testing::CliResult a = run("cli-a", "verify --no-daemon --format json " + root_ + "/plan.json");
  testing::CliResult b =
      run("cli-b", "verify --no-daemon --format json " + root_ + "/renamed.json");
  testing::CliResult s = run("cli-b", "cache stats --format json");
  unsetenv("SHARDPROOF_REMOTE_CACHE");
  unsetenv("SHARDPROOF_CACHE_KEY_FILE");
  setenv("SHARDPROOF_CACHE_DIR", saved_dir.c_str(), 1);
  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(b.code, 0) << b.err;
  ASSERT_EQ(s.code, 0) << s.err;
  nlohmann::json ra = nlohmann::json::parse(a.out), rb = nlohmann::json::parse(b.out);
  EXPECT_GT(ra["stats"]["solved"].get<int>(), 0);
  EXPECT_EQ(rb["stats"]["solved"].get<int>(), 0);
  nlohmann::json stats = nlohmann::json::parse(s.out);
  EXPECT_EQ(stats["remote"]["reachable"], true);
  EXPECT_EQ(stats["remote"]["hits"], rb["stats"]["cached"]);
  EXPECT_EQ(stats["remote"]["errors"], 0);
  EXPECT_GT(stats["remote"]["keys"].get<int>(), 0);
}

// The remote named in the repository's .shardproof.json (not the
// environment) is used in process and through the daemon; the daemon that
// answers once it is configured is not the one started before (the remote
// settings are part of a daemon's identity), with the same cache directory.
TEST_F(RemoteCacheTest, RepositoryFileConfiguresTheRemoteAndTheDaemonFollows) {
  start();
  testing::IsolatedEnv env;  // cache directory and daemons of this test
  const fs::path repo = root_ + "/repo", saved_cwd = fs::current_path();
  fs::create_directories(repo);
  std::ofstream(repo / "plan.json") << plan_text();
  std::ofstream(repo / "bug.json") << plan_text(some_bug());
  unsetenv("SHARDPROOF_REMOTE_CACHE");
  setenv("SHARDPROOF_CACHE_KEY_FILE", team_key_.c_str(), 1);
  fs::current_path(repo);
  auto run = [&](const std::string& args) { return testing::run_cli(args, root_ + "/err.txt"); };
  auto daemon_pid = [&] {
    testing::CliResult r = run("daemon status --format json");
    return r.code == 0 ? nlohmann::json::parse(r.out).value("pid", -1) : -1;
  };

  // No remote yet: a daemon that proves alone.
  testing::CliResult a = run("verify --format json plan.json");
  const int first_daemon = daemon_pid();
  EXPECT_EQ(server_->keys(), 0);

  std::ofstream(repo / ".shardproof.json")
      << nlohmann::json{{"verify", {{"remote_cache", server_->url()}}}}.dump();
  testing::CliResult config = run("config --format json");
  testing::CliResult b = run("verify --format json bug.json");
  const int second_daemon = daemon_pid();
  const long long keys = server_->keys();
  // Another machine, in process: the file's remote has the proofs.
  setenv("SHARDPROOF_CACHE_DIR", (env.root() + "/other-machine").c_str(), 1);
  testing::CliResult c = run("verify --no-daemon --format json bug.json");
  setenv("SHARDPROOF_CACHE_DIR", env.cache_dir().c_str(), 1);
  // The environment comes before the file.
  setenv("SHARDPROOF_REMOTE_CACHE", "unix:///nowhere/redis.sock", 1);
  testing::CliResult overridden = run("config --format json");
  unsetenv("SHARDPROOF_REMOTE_CACHE");

  run("daemon stop");  // the daemon with the remote
  fs::remove(repo / ".shardproof.json");
  run("daemon stop");  // the one without
  fs::current_path(saved_cwd);
  unsetenv("SHARDPROOF_CACHE_KEY_FILE");

  ASSERT_EQ(a.code, 0) << a.err;
  ASSERT_EQ(config.code, 0) << config.err;
  nlohmann::json settings = nlohmann::json::parse(config.out);
  EXPECT_EQ(settings["remote_cache"]["value"], server_->url());
  EXPECT_NE(settings["remote_cache"]["origin"].get<std::string>().find(".shardproof.json"),
            std::string::npos);
  EXPECT_EQ(settings["remote_cache_mode"]["origin"], "default");
  ASSERT_EQ(b.code, 1) << b.err;
  EXPECT_GT(first_daemon, 0);
  EXPECT_GT(second_daemon, 0);
  EXPECT_NE(first_daemon, second_daemon) << "the daemon started without the remote answered";
  EXPECT_GT(keys, 0) << "the daemon did not write to the remote the file names";
  ASSERT_EQ(c.code, 1) << c.err;
  EXPECT_EQ(nlohmann::json::parse(c.out)["stats"]["solved"].get<int>(), 0) << c.out;
  ASSERT_EQ(overridden.code, 0) << overridden.err;
  settings = nlohmann::json::parse(overridden.out);
  EXPECT_EQ(settings["remote_cache"]["origin"], "SHARDPROOF_REMOTE_CACHE");
  EXPECT_EQ(settings["remote_cache"]["value"], "unix:///nowhere/redis.sock");
}

}  // namespace
}  // namespace shardproof::cache
