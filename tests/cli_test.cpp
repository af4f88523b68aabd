// End-to-end tests of the `shardproof` binary: exit codes, bad input, the
// shipped examples' verdicts, several plans at once, and the plan command.
// The binary is run as a user would run it (popen), so these also catch
// what unit tests cannot: CLI11 wiring, stdout/stderr, exit statuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;

const std::string kCli = SHARDPROOF_CLI;
const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";

using shardproof::testing::CliResult;

std::string quote(const std::string& s) {
  return shardproof::testing::shell_quote(s);
}
std::string slurp(const fs::path& p) {
  return shardproof::testing::slurp_file(p);
}

// A scratch directory per test, removed afterwards.
class CliTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliTest() : ScratchDirTest("shardproof_cli_test_") {}

  // `args` is pasted into a shell command line: quote paths with quote().
  CliResult run(const std::string& args) {
    return shardproof::testing::run_cli(args, dir_ / "stderr.txt");
  }

  shardproof::testing::IsolatedEnv env_;  // own cache and daemon, stopped at the end
};

// ---- command line ----

TEST_F(CliTest, HelpExitsZero) {
  CliResult r = run("--help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verify"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("plan"), std::string::npos) << r.out;
  EXPECT_EQ(run("verify --help").code, 0);
  EXPECT_EQ(run("plan --help").code, 0);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run("--no-such-flag").code, 2);
  EXPECT_EQ(run("").code, 2);  // a subcommand is required
  EXPECT_EQ(run("frobnicate").code, 2);
  EXPECT_EQ(run("verify").code, 2);  // no plan given
  EXPECT_EQ(run("verify --format xml " + quote((kExamples / "tp2-ffn.json").string())).code, 2);
  CliResult r = run("verify --no-such-flag x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.err.empty());
  EXPECT_EQ(run("verify --timeout-ms soon " + quote((kExamples / "tp2-ffn.json").string())).code,
            2);
}

TEST_F(CliTest, SolverLimitsAreOptions) {
  std::string plan = quote((kExamples / "tp2-ffn.json").string());
  EXPECT_EQ(run("verify --rlimit 1000000 --timeout-ms 5000 " + plan).code, 0);
  EXPECT_EQ(run("verify --timeout-ms 0 " + plan).code, 0);
}

TEST_F(CliTest, VersionPrintsIt) {
  CliResult r = run("version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("shardproof ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("z3 "), std::string::npos) << r.out;
}

// ---- bad input: invalid content is 2, an unreadable file is 4 ----

void expect_invalid(const CliResult& r) {
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["verdict"], "invalid");
  EXPECT_TRUE(j["error"].is_object());
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << j.dump();
}

TEST_F(CliTest, EmptyFileIsInvalid) {
  expect_invalid(run("verify --format json " + quote(file("empty.json", "").string())));
}

TEST_F(CliTest, TruncatedJsonIsInvalid) {
  std::string text = slurp(kExamples / "tp2-ffn.json");
  ASSERT_GT(text.size(), 100u);
  fs::path p = file("truncated.json", text.substr(0, text.size() / 2));
  expect_invalid(run("verify --format json " + quote(p.string())));
}

TEST_F(CliTest, BinaryGarbageIsInvalid) {
  std::string garbage;
  for (int i = 0; i < 512; ++i) garbage += static_cast<char>((i * 197 + 13) % 256);
  expect_invalid(run("verify --format json " + quote(file("garbage.json", garbage).string())));
}

TEST_F(CliTest, NotAPlanIsInvalid) {
  expect_invalid(run("verify --format json " + quote(file("array.json", "[1, 2]").string())));
  expect_invalid(
      run("verify --format json " + quote(file("format.json", R"({"format": "x"})").string())));
}

// A path naming no plan is the user's mistake: invalid input (issue 26).
TEST_F(CliTest, MissingFileIsInvalid) {
  CliResult r = run("verify --format json " + quote((dir_ / "does-not-exist.json").string()));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["verdict"], "invalid");
  EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
}

TEST_F(CliTest, InvalidTextNamesTheFile) {
  fs::path p = file("empty.json", "");
  CliResult r = run("verify " + quote(p.string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(p.string() + ": INVALID PLAN"), std::string::npos) << r.out;
}

// ---- the shipped examples ----

struct Expected {
  std::string plan, verdict, tensor;
};

std::vector<Expected> read_expected() {
  std::vector<Expected> rows;
  std::ifstream in(kExamples / "expected.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Expected e;
    std::getline(fields, e.plan, '\t');
    std::getline(fields, e.verdict, '\t');
    std::getline(fields, e.tensor, '\t');
    rows.push_back(e);
  }
  return rows;
}

int exit_code_of(const std::string& verdict) {
  if (verdict == "equivalent") return 0;
  if (verdict == "not-equivalent") return 1;
  if (verdict == "invalid") return 2;
  if (verdict == "unknown") return 3;
  return 4;
}

TEST_F(CliTest, ExamplesGiveTheExpectedVerdicts) {
  std::vector<Expected> rows = read_expected();
  ASSERT_GE(rows.size(), 3u) << "examples/expected.tsv missing or empty";
  for (const Expected& e : rows) {
    SCOPED_TRACE(e.plan);
    CliResult r = run("verify --format json " + quote((kExamples / e.plan).string()));
    EXPECT_EQ(r.code, exit_code_of(e.verdict)) << r.out << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    EXPECT_EQ(j["verdict"], e.verdict) << j.dump(2);
    EXPECT_EQ(j["stats"]["logical_ops"].is_number_integer(), true);
    if (e.verdict == "equivalent") {
      EXPECT_TRUE(j["findings"].empty()) << j.dump(2);
    }
    if (e.tensor != "-" && !e.tensor.empty()) {
      bool named = false;
      for (const auto& f : j["findings"]) named = named || f["tensor"] == e.tensor;
      EXPECT_TRUE(named) << "no finding names " << e.tensor << ":\n" << j.dump(2);
    }
  }
}

TEST_F(CliTest, TextReportOfABug) {
  CliResult r = run("verify " + quote((kExamples / "tp2-ffn-bug-mean.json").string()));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("tp2-ffn-bug-mean.json: NOT EQUIVALENT ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("logical tensor: out"), std::string::npos) << r.out;
  // stderr is not a terminal here: no progress line may leak into it.
  EXPECT_EQ(r.err.find("stages "), std::string::npos) << r.err;
}

TEST_F(CliTest, ALogGetsPlainProgressLinesOnlyFromALongRun) {
  const std::string good = quote((kExamples / "tp2-ffn.json").string());
  // A short run writes nothing into a log (TextReportOfABug); a run longer
  // than the period writes plain lines, with no terminal control codes.
  setenv("SHARDPROOF_PROGRESS_EVERY_MS", "0", 1);
  CliResult r = run("verify --no-daemon " + good);
  CliResult quiet = run("verify --no-daemon --quiet " + good);
  unsetenv("SHARDPROOF_PROGRESS_EVERY_MS");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("tp2-ffn.json: stages "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\033'), std::string::npos) << r.err;
  EXPECT_EQ(quiet.err.find("stages "), std::string::npos) << quiet.err;
}

// ---- several plans ----

TEST_F(CliTest, SeveralPlansExitWithTheMostSevereVerdict) {
  std::string good = quote((kExamples / "tp2-ffn.json").string());
  std::string bug = quote((kExamples / "tp2-ffn-bug-mean.json").string());
  std::string empty = quote(file("empty.json", "").string());
  std::string missing = quote((dir_ / "missing.json").string());

  EXPECT_EQ(run("verify " + good + " " + good).code, 0);
  EXPECT_EQ(run("verify " + good + " " + bug).code, 1);
  EXPECT_EQ(run("verify " + bug + " " + empty + " " + good).code, 2);
  EXPECT_EQ(run("verify " + empty + " " + missing + " " + bug).code, 2);

  CliResult r = run("verify --format json " + good + " " + bug);
  EXPECT_EQ(r.code, 1);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["verdict"], "equivalent");
  EXPECT_EQ(j[1]["verdict"], "not-equivalent");
}

// ---- plan ----

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

TEST_F(CliTest, PlanListsModels) {
  CliResult r = run("plan --list-models");
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> models = lines_of(r.out);
  EXPECT_NE(std::find(models.begin(), models.end(), "mlp"), models.end()) << r.out;
}

TEST_F(CliTest, PlanListsBugs) {
  CliResult r = run("plan mlp --list-bugs");
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> bugs = lines_of(r.out);
  ASSERT_FALSE(bugs.empty());
  for (const std::string& line : bugs) {
    // name first, then a description
    EXPECT_NE(line.find(' '), std::string::npos) << line;
    EXPECT_NE(line[0], ' ') << line;
  }
}

// Each bug's line says what it needs; a bug the configuration cannot carry
// is refused (exit 2) with that need, never written as a correct plan.
TEST_F(CliTest, PlanBugNeedsAreListedAndEnforced) {
  CliResult list = run("plan llama3-tiny --list-bugs");
  EXPECT_EQ(list.code, 0) << list.err;
  bool listed = false;
  for (const std::string& line : lines_of(list.out))
    if (line.rfind("clip-norm-missing-pp ", 0) == 0)
      listed = line.find("[needs: --clip and pp >= 2]") != std::string::npos;
  EXPECT_TRUE(listed) << list.out;
  CliResult r = run("plan llama3-tiny --pp 2 --bug clip-norm-missing-pp");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("does not apply to this config (needs --clip and pp >= 2)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << "no plan on stdout";
}

TEST_F(CliTest, PlanRejectsBadConfigurations) {
  CliResult r = run("plan mlp --hidden 8 --tp 3");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.err.empty());
  EXPECT_TRUE(r.out.empty()) << "no half plan on stdout";

  r = run("plan no-such-model");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.err.empty());

  r = run("plan mlp --bug no-such-bug");
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(r.err.empty());

  EXPECT_EQ(run("plan mlp --dp 0").code, 2);
  EXPECT_EQ(run("plan mlp --optimizer lbfgs").code, 2);
  EXPECT_EQ(run("plan").code, 2);  // MODEL missing
}

TEST_F(CliTest, PlanToStdoutIsAPlan) {
  CliResult r = run("plan mlp --dp 2 --tp 2");
  EXPECT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out.substr(0, 200);
  EXPECT_EQ(j["format"], "shardproof-plan/1");
}

// The compact form of a transformer plan through the CLI: written, verified;
// a flag it does not support is refused with exit 2, naming the flag.
TEST_F(CliTest, CompactTransformerPlan) {
  fs::path p = dir_ / "tiny.json";
  CliResult r = run("plan llama3-tiny --dp 2 --tp 2 --pp 2 --microbatches 2 --sp --compact -o " +
                    quote(p.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(p))["format"], "shardproof-plan/1.1");
  r = run("verify " + quote(p.string()));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(": EQUIVALENT ("), std::string::npos) << r.out;

  r = run("plan llama3-tiny --pp 2 --tie-embeddings --compact");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--compact does not support --tie-embeddings"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST_F(CliTest, PlanToUnwritablePathIsInternal) {
  CliResult r = run("plan mlp -o " + quote((dir_ / "no-dir" / "plan.json").string()));
  EXPECT_EQ(r.code, 4);
  EXPECT_FALSE(r.err.empty());
}

// The README tour: generate a plan, then verify it.
TEST_F(CliTest, GeneratedPlanVerifies) {
  fs::path p = dir_ / "mlp.json";
  CliResult r = run("plan mlp --dp 2 --tp 2 -o " + quote(p.string()));
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(fs::exists(p));
  r = run("verify " + quote(p.string()));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(": EQUIVALENT ("), std::string::npos) << r.out;
}

// One injected bug, through the CLI: generated and caught.
TEST_F(CliTest, InjectedBugIsCaught) {
  CliResult list = run("plan mlp --list-bugs");
  ASSERT_EQ(list.code, 0);
  for (const std::string& line : lines_of(list.out)) {
    std::string bug = line.substr(0, line.find(' '));
    fs::path p = dir_ / (bug + ".json");
    // Not every bug fits every configuration; take the first that does.
    CliResult gen = run("plan mlp --dp 2 --tp 2 --pp 2 --microbatches 2 --bug " + quote(bug) +
                        " -o " + quote(p.string()));
    if (gen.code != 0) continue;
    CliResult r = run("verify --format json " + quote(p.string()));
    EXPECT_EQ(r.code, 1) << bug << "\n" << r.out << r.err;
    return;
  }
  FAIL() << "no bug of mlp fits dp2 tp2 pp2 mb2";
}

}  // namespace
