// `verify --output FORMAT=FILE` (issue 25): one verification writes stdout
// in --format and every requested file, each the same reports as that
// format on stdout; a malformed spec is a usage error, an unwritable file
// an internal error.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;
using shardproof::testing::CliResult;
using shardproof::testing::shell_quote;
using shardproof::testing::slurp_file;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";
const std::string kPlans = shell_quote((kExamples / "tp2-ffn.json").string()) + " " +
                           shell_quote((kExamples / "tp2-ffn-bug-mean.json").string());

class VerifyOutputsTest : public shardproof::testing::ScratchDirTest {
 protected:
  VerifyOutputsTest() : ScratchDirTest("shardproof_verify_outputs_") {}
  CliResult verify(const std::string& args) {
    return shardproof::testing::run_cli("verify --no-daemon --quiet " + args, dir_ / "stderr.txt");
  }
  std::string out(const std::string& name) { return (dir_ / name).string(); }
  shardproof::testing::IsolatedEnv env_;
};

TEST_F(VerifyOutputsTest, OneRunWritesEveryOutput) {
  CliResult r = verify("--output sarif=" + shell_quote(out("r.sarif")) + " --output junit=" +
                       shell_quote(out("r.xml")) + " --output json=" + shell_quote(out("r.json")) +
                       " --output text=" + shell_quote(out("r.txt")) + " " + kPlans);
  ASSERT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("NOT EQUIVALENT"), std::string::npos) << r.out;  // stdout: text
  EXPECT_EQ(slurp_file(out("r.txt")), r.out);

  nlohmann::json sarif = nlohmann::json::parse(slurp_file(out("r.sarif")));
  EXPECT_EQ(sarif["version"], "2.1.0");
  CliResult direct = verify("--format sarif " + kPlans);
  EXPECT_EQ(sarif["runs"][0]["results"].size(),
            nlohmann::json::parse(direct.out)["runs"][0]["results"].size());
  EXPECT_GT(sarif["runs"][0]["results"].size(), 0u);

  nlohmann::json json = nlohmann::json::parse(slurp_file(out("r.json")));
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["verdict"], "equivalent");
  EXPECT_EQ(json[1]["verdict"], "not-equivalent");

  std::string junit = slurp_file(out("r.xml"));
  EXPECT_NE(junit.find("<testsuites"), std::string::npos);
  EXPECT_NE(junit.find("<failure"), std::string::npos);
  for (const auto& entry : fs::directory_iterator(dir_))  // no temporary file left
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << entry.path();
}

TEST_F(VerifyOutputsTest, BadSpecIsAUsageError) {
  for (const char* spec : {"pdf=x.pdf", "sarif", "json="}) {
    CliResult r = verify(std::string("--output ") + spec + " " + kPlans);
    EXPECT_EQ(r.code, 2) << spec;
    EXPECT_NE(r.err.find("--output: "), std::string::npos) << r.err;
  }
}

TEST_F(VerifyOutputsTest, UnwritableFileIsReported) {
  CliResult r = verify("--format json --output sarif=" + shell_quote(out("missing/dir/r.sarif")) +
                       " " + kPlans);
  EXPECT_EQ(r.code, 4);
  EXPECT_NE(r.err.find("cannot write"), std::string::npos) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 2u);  // stdout still has the reports
}

}  // namespace
