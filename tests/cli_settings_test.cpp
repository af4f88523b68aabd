// Settings of verify (issue 26): the "verify" section of .shardproof.json,
// the environment over it, flags over both; `shardproof config` shows each
// value's origin; malformed values are warnings that name them; verify
// honours them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "hooks/repo_config.h"
#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;
using shardproof::testing::CliResult;
using shardproof::testing::shell_quote;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliSettingsTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliSettingsTest() : ScratchDirTest("shardproof_cli_settings_") {}

  void SetUp() override {
    ScratchDirTest::SetUp();
    fs::create_directories(dir_ / "repo" / ".git");
    fs::create_directories(dir_ / "repo" / "sub");
  }

  // Runs in `cwd` (the repository's subdirectory by default) with `env`
  // ("NAME=value ..." or "") set.
  CliResult run(const std::string& args, const std::string& env = "", const fs::path& cwd = {}) {
    fs::path where = cwd.empty() ? dir_ / "repo" / "sub" : cwd;
    std::string cmd = "cd " + shell_quote(where.string()) + " && " + env + " " +
                      shell_quote(SHARDPROOF_CLI) + " " + args + " 2>" +
                      shell_quote((dir_ / "err").string()) + " </dev/null";
    CliResult r;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    int status = pclose(pipe);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = shardproof::testing::slurp_file(dir_ / "err");
    return r;
  }

  fs::path settings(const std::string& text) { return file("repo/.shardproof.json", text); }

  shardproof::testing::IsolatedEnv env_;
};

TEST_F(CliSettingsTest, DefaultsWithoutAFile) {
  CliResult r = run("config");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "(default) jobs = 0")) << r.out;
  EXPECT_TRUE(has(r.out, "(default) rlimit = ")) << r.out;
  EXPECT_TRUE(has(r.out, "(default) timeout_ms = ")) << r.out;
  EXPECT_TRUE(has(r.out, "(default) unknown = block")) << r.out;
}

TEST_F(CliSettingsTest, FileThenEnvironmentThenFlag) {
  fs::path f = settings(R"({"verify": {"jobs": 3, "timeout_ms": 1234, "unknown": "warn"}})");
  CliResult r = run("config");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "(" + f.string() + ") jobs = 3")) << r.out;
  EXPECT_TRUE(has(r.out, "(" + f.string() + ") timeout_ms = 1234")) << r.out;
  EXPECT_TRUE(has(r.out, "(" + f.string() + ") unknown = warn")) << r.out;

  r = run("config", "SHARDPROOF_JOBS=5");
  EXPECT_TRUE(has(r.out, "(SHARDPROOF_JOBS) jobs = 5")) << r.out;
  r = run("config --jobs 7", "SHARDPROOF_JOBS=5");
  EXPECT_TRUE(has(r.out, "(--jobs) jobs = 7")) << r.out;

  r = run("config --format json", "SHARDPROOF_JOBS=5");
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["jobs"]["value"], "5");
  EXPECT_EQ(j["jobs"]["origin"], "SHARDPROOF_JOBS");
  EXPECT_EQ(j["timeout_ms"]["origin"], f.string());
}

TEST_F(CliSettingsTest, TheFileStopsAtTheRepositoryRoot) {
  file(".shardproof.json", R"({"verify": {"jobs": 9}})");  // above the repository
  CliResult r = run("config");
  EXPECT_TRUE(has(r.out, "(default) jobs = 0")) << r.out;
}

TEST_F(CliSettingsTest, MalformedValuesAreWarningsThatNameThem) {
  settings(R"({"verify": {"jobs": "many", "rlimit": -5, "jbos": 2}})");
  CliResult r = run("config", "SHARDPROOF_TIMEOUT_MS=soon");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.err, "/verify/jobs: expected a whole number")) << r.err;
  EXPECT_TRUE(has(r.err, "/verify/rlimit: expected a positive whole number")) << r.err;
  EXPECT_TRUE(has(r.err, "unknown key \"jbos\"; did you mean \"jobs\"?")) << r.err;
  EXPECT_TRUE(has(r.err, "$SHARDPROOF_TIMEOUT_MS: expected")) << r.err;
  EXPECT_TRUE(has(r.out, "(default) jobs = 0")) << r.out;
  EXPECT_TRUE(has(r.out, "(default) timeout_ms = ")) << r.out;
  r = run("cache stats", "SHARDPROOF_CACHE_MAX_SIZE=huge SHARDPROOF_DAEMON_IDLE_TIMEOUT=later");
  EXPECT_TRUE(has(r.err, "$SHARDPROOF_CACHE_MAX_SIZE: expected a size")) << r.err;
  EXPECT_TRUE(has(r.err, "$SHARDPROOF_DAEMON_IDLE_TIMEOUT: expected a duration")) << r.err;
  // A bad flag is a usage error, not a warning.
  EXPECT_EQ(run("config --rlimit 0").code, 2);
}

// The remote tier reads its settings from the environment itself and, when
// one is malformed, takes the safe choice (read-only, 250 ms, no remote),
// not the file's value: `config` shows what the cache will do.
TEST_F(CliSettingsTest, MalformedRemoteSettingsShowTheCachesSafeChoice) {
  settings(R"({"verify": {"remote_cache": "redis://cache.internal:6379/0",
                          "remote_cache_mode": "read-write", "remote_cache_timeout_ms": 900}})");
  CliResult r = run("config --format json",
                    "SHARDPROOF_REMOTE_CACHE_MODE=write SHARDPROOF_REMOTE_CACHE_TIMEOUT_MS=soon");
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["remote_cache_mode"]["value"], "read-only");
  EXPECT_EQ(j["remote_cache_mode"]["origin"], "SHARDPROOF_REMOTE_CACHE_MODE, malformed");
  EXPECT_EQ(j["remote_cache_timeout_ms"]["value"], "250");
  EXPECT_TRUE(has(r.err,
                  "$SHARDPROOF_REMOTE_CACHE_MODE: expected \"read-write\" or "
                  "\"read-only\", found \"write\"; the cache uses read-only"))
      << r.err;
  // Well formed, the environment wins as for every setting; the file below it.
  r = run("config --format json", "SHARDPROOF_REMOTE_CACHE_MODE=read-only");
  j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["remote_cache_mode"]["origin"], "SHARDPROOF_REMOTE_CACHE_MODE");
  EXPECT_EQ(j["remote_cache_timeout_ms"]["value"], "900");
  r = run("config --format json", "SHARDPROOF_REMOTE_CACHE=ftp://nowhere");
  j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["remote_cache"]["value"], "");
}

// One size parser for every SHARDPROOF_* size: the plan reader honours the
// "2MB" the cache and the daemon take, and a malformed limit is a warning
// that names it, then the default.
TEST_F(CliSettingsTest, TheFileSizeLimitTakesEverySizeAndWarnsAboutMalformedOnes) {
  const std::string plan = shell_quote((kExamples / "tp2-ffn.json").string());
  for (const char* limit : {"1KB", "1KiB", "1k", "1024"}) {
    CliResult r = run("verify --no-daemon --no-cache " + plan,
                      std::string("SHARDPROOF_MAX_FILE_BYTES=") + limit);
    EXPECT_EQ(r.code, 4) << limit << ": " << r.out << r.err;
    EXPECT_TRUE(has(r.out + r.err, "more than 1024 bytes")) << limit << ": " << r.out << r.err;
    EXPECT_FALSE(has(r.err, "SHARDPROOF_MAX_FILE_BYTES: expected")) << r.err;
  }
  CliResult r = run("verify --no-daemon --no-cache " + plan, "SHARDPROOF_MAX_FILE_BYTES=2MB");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  r = run("verify --no-daemon --no-cache " + plan, "SHARDPROOF_MAX_FILE_BYTES=1XB");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.err,
                  "$SHARDPROOF_MAX_FILE_BYTES: expected a size such as 512M or 2G, found "
                  "\"1XB\"; the default is used"))
      << r.err;
}

TEST_F(CliSettingsTest, VerifyHonoursThem) {
  // Two of llama3-tiny's stages need the solver: with one unit of rlimit
  // they stay undecided.
  fs::path p = dir_ / "llama.json";
  ASSERT_EQ(run("plan llama3-tiny -o " + shell_quote(p.string())).code, 0);
  std::string plan = shell_quote(p.string());
  settings(R"({"verify": {"rlimit": 1}})");
  CliResult r = run("verify --no-cache " + plan);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "UNKNOWN")) << r.out;
  EXPECT_EQ(run("verify --no-cache " + plan, "SHARDPROOF_RLIMIT=20000000").code, 0);

  // "warn" lets it through, saying so; the report still says unknown.
  settings(R"({"verify": {"rlimit": 1, "unknown": "warn"}})");
  r = run("verify --no-cache " + plan);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "UNKNOWN")) << r.out;
  EXPECT_TRUE(has(r.err, "let through")) << r.err;
  // ...but never a refutation.
  r = run("verify --no-cache " + shell_quote((kExamples / "tp2-ffn-bug-mean.json").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;

  // A flag beats the file.
  r = run("verify --no-cache --rlimit 20000000 --unknown block " + plan);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "EQUIVALENT")) << r.out;
}

// The hook reads the same file: its "verify" section is not an unknown key.
TEST(CliSettingsHooks, RepoConfigTakesAVerifySection) {
  std::string error;
  EXPECT_TRUE(shardproof::hooks::parse_repo_config(R"({"verify": {"jobs": 2}})", &error)) << error;
  EXPECT_FALSE(shardproof::hooks::parse_repo_config(R"({"verify": 3})", &error));
  EXPECT_TRUE(has(error, "/verify")) << error;
}

}  // namespace
