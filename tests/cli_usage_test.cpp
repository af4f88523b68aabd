// The command line explains itself (issue 26): unknown commands and flags
// get a "did you mean", `help [cmd]`, one version text, per-action options
// for `daemon` and `cache`, ranges in words, a missing plan file is invalid
// input naming it, `-` reads a plan from stdin, and misspelt plan keys and
// operators get a suggestion.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;
using shardproof::testing::CliResult;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";

std::string quote(const std::string& s) {
  return shardproof::testing::shell_quote(s);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class CliUsageTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliUsageTest() : ScratchDirTest("shardproof_cli_usage_") {}

  CliResult run(const std::string& args) {
    return shardproof::testing::run_cli(args, dir_ / "stderr.txt");
  }

  // The plan `p` with one change, written to the scratch directory.
  fs::path edited(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json p =
        nlohmann::json::parse(shardproof::testing::slurp_file(kExamples / "tp2-ffn.json"));
    edit(p);
    return file(name, p.dump(2));
  }

  std::string plan() const { return quote((kExamples / "tp2-ffn.json").string()); }

  shardproof::testing::IsolatedEnv env_;
};

TEST_F(CliUsageTest, UnknownCommandSuggestsTheClosest) {
  CliResult r = run("verfy x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "unknown command \"verfy\"; did you mean \"verify\"?")) << r.err;
  r = run("cache clera");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "did you mean \"clear\"?")) << r.err;
  r = run("frobnicate");  // nothing close: no suggestion, but the list
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(has(r.err, "did you mean")) << r.err;
  EXPECT_TRUE(has(r.err, "verify")) << r.err;
}

TEST_F(CliUsageTest, NoCommandListsThem) {
  CliResult r = run("");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "which command?")) << r.err;
  EXPECT_TRUE(has(r.err, "verify")) << r.err;
  r = run("daemon");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "status")) << r.err;
}

TEST_F(CliUsageTest, HelpCommand) {
  CliResult r = run("help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "verify")) << r.out;
  EXPECT_TRUE(has(r.out, "daemon")) << r.out;
  r = run("help verify");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "--rlimit")) << r.out;
  r = run("help cache gc");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has(r.out, "--max-size")) << r.out;
  r = run("help verfy");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "did you mean \"verify\"?")) << r.err;
}

TEST_F(CliUsageTest, VersionFlagAndCommandAgree) {
  CliResult flag = run("--version");
  CliResult cmd = run("version");
  EXPECT_EQ(flag.code, 0);
  EXPECT_EQ(cmd.code, 0);
  EXPECT_EQ(flag.out, cmd.out);
  EXPECT_TRUE(has(cmd.out, "z3 ")) << cmd.out;
}

TEST_F(CliUsageTest, ActionsCheckTheirOwnOptions) {
  fs::create_directories(env_.cache_dir());
  CliResult r = run("cache clear --max-size 1G");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_FALSE(has(r.out, "cleared")) << r.out;
  EXPECT_TRUE(has(r.err, "--max-size is an option of `shardproof cache gc`")) << r.err;
  EXPECT_EQ(run("cache stats --max-age 1d").code, 2);
  EXPECT_EQ(run("daemon stop --jobs 2").code, 2);
  EXPECT_EQ(run("daemon status --idle-timeout 5").code, 2);
  EXPECT_EQ(run("cache gc --max-size 12X").code, 2);
  r = run("help daemon");
  EXPECT_TRUE(has(r.out, "cancel") || has(r.out, "status")) << r.out;
}

TEST_F(CliUsageTest, RangesInWords) {
  CliResult r = run("verify --jobs -1 " + plan());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "--jobs: must be a whole number between 0 and 1024")) << r.err;
  EXPECT_LT(r.err.size(), 300u) << r.err;
  r = run("daemon start --jobs 99999");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "between 0 and 1024")) << r.err;
}

TEST_F(CliUsageTest, MisspeltFlagSuggestsTheClosest) {
  CliResult r = run("verify --fromat json " + plan());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "did you mean \"--format\"?")) << r.err;
  r = run("cache gc --max-szie 1G");
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(has(r.err, "did you mean \"--max-size\"?")) << r.err;
}

TEST_F(CliUsageTest, MissingFileOrDirectoryIsInvalidInput) {
  std::string missing = (dir_ / "nope.json").string();
  CliResult r = run("verify --format json " + quote(missing));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["verdict"], "invalid");
  EXPECT_TRUE(has(r.out, missing)) << r.out;
  r = run("verify " + quote(dir_.string()));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_TRUE(has(r.out, dir_.string())) << r.out;
  EXPECT_FALSE(has(r.out, "INTERNAL ERROR")) << r.out;
}

TEST_F(CliUsageTest, DashReadsThePlanFromStdin) {
  for (const char* name : {"tp2-ffn.json", "tp2-ffn-bug-mean.json"}) {
    std::string cmd = "cat " + quote((kExamples / name).string()) + " | " + quote(SHARDPROOF_CLI) +
                      " verify --no-daemon - 2>" + quote((dir_ / "err").string());
    FILE* pipe = popen(cmd.c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
    int status = pclose(pipe);
    bool bug = std::string(name).find("bug") != std::string::npos;
    EXPECT_EQ(WEXITSTATUS(status), bug ? 1 : 0) << out;
    EXPECT_TRUE(has(out, "<stdin>")) << out;
  }
}

TEST_F(CliUsageTest, MisspeltPlanKeyAndOperatorAreSuggested) {
  fs::path key = edited("key.json", [](nlohmann::json& p) {
    p["logical"]["opps"] = p["logical"]["ops"];
    p["logical"].erase("ops");
  });
  CliResult r = run("verify --no-daemon " + quote(key.string()));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "did you mean \"ops\"?")) << r.out;

  fs::path op =
      edited("op.json", [](nlohmann::json& p) { p["logical"]["ops"][0]["op"] = "matmull"; });
  r = run("verify --no-daemon " + quote(op.string()));
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(has(r.out, "unknown operator \"matmull\"; did you mean \"matmul\"?")) << r.out;
}

}  // namespace
