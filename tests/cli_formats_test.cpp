// End-to-end tests of `verify --format github|junit|sarif` on the shipped
// examples: annotations at the plan's lines, well-formed JUnit XML with the
// right counts, SARIF 2.1.0 results, several plans with an invalid one, the
// exit codes the same in every format, and the daemon and in-process runs
// rendering alike.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"
#include "tests/xml_check.h"

namespace {

namespace fs = std::filesystem;
namespace xml = shardproof::testing::xml;
using shardproof::testing::CliResult;
using shardproof::testing::shell_quote;
using shardproof::testing::slurp_file;

const fs::path kExamples = fs::path(SHARDPROOF_SOURCE_DIR) / "examples";
const std::string kGood = (kExamples / "tp2-ffn.json").string();
const std::string kBug = (kExamples / "tp2-ffn-bug-mean.json").string();

class CliFormatsTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliFormatsTest() : ScratchDirTest("shardproof_cli_formats_") {}

  // `verify --format FORMAT` on the plans, each quoted.
  CliResult verify(const std::string& format, const std::vector<std::string>& plans,
                   const std::string& extra = "") {
    std::string args = "verify --format " + format + " " + extra;
    for (const std::string& p : plans) args += " " + shell_quote(p);
    return shardproof::testing::run_cli(args, dir_ / "stderr.txt");
  }

  shardproof::testing::IsolatedEnv env_;  // own cache and daemon, stopped at the end
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& line : lines_of(text))
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// A workflow command's property value, as the Actions toolkit escapes it.
std::string github_property(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

// The value of `key=` in a command's properties ("" when absent).
std::string property(const std::string& command, const std::string& key) {
  size_t end = command.find("::", 2);
  std::string props = command.substr(0, end);
  size_t at = props.find(" " + key + "=");
  if (at == std::string::npos) at = props.find("," + key + "=");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  return props.substr(at, props.find(',', at) - at);
}

// Line `n` (1-based) of a file.
std::string line_of(const std::string& path, int n) {
  std::vector<std::string> lines = lines_of(slurp_file(path));
  return n >= 1 && n <= static_cast<int>(lines.size()) ? lines[n - 1] : "";
}

// ---- github ----

TEST_F(CliFormatsTest, GithubAnnotatesEachFindingAtItsLine) {
  CliResult json = verify("json", {kBug});
  ASSERT_EQ(json.code, 1) << json.out << json.err;
  nlohmann::json findings = nlohmann::json::parse(json.out)["findings"];
  ASSERT_FALSE(findings.empty());

  CliResult r = verify("github", {kBug});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  std::vector<std::string> lines = lines_of(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_NE(lines[0].find("tp2-ffn-bug-mean.json: NOT EQUIVALENT ("), std::string::npos) << r.out;
  std::vector<std::string> errors = lines_starting(r.out, "::error ");
  ASSERT_EQ(errors.size(), findings.size()) << r.out;
  for (size_t i = 0; i < errors.size(); ++i) {
    SCOPED_TRACE(errors[i]);
    EXPECT_EQ(property(errors[i], "file"), github_property(kBug));
    int line = std::atoi(property(errors[i], "line").c_str());
    std::string tensor = findings[i]["tensor"], op = findings[i]["ops"][0];
    // The line of the parallel op that produced it: what a reviewer edits.
    EXPECT_NE(line_of(kBug, line).find("\"name\": \"" + op + "\""), std::string::npos)
        << "line " << line << ": " << line_of(kBug, line);
    EXPECT_NE(errors[i].find("logical tensor " + tensor), std::string::npos);
  }
  // Nothing but the verdict line and the commands.
  EXPECT_EQ(lines.size(), 1 + errors.size()) << r.out;
}

TEST_F(CliFormatsTest, GithubCorrectPlanHasNoCommands) {
  CliResult r = verify("github", {kGood});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_NE(lines[0].find("tp2-ffn.json: EQUIVALENT ("), std::string::npos) << r.out;
  EXPECT_TRUE(lines_starting(r.out, "::").empty()) << r.out;
}

TEST_F(CliFormatsTest, GithubSeveralPlansWithAnInvalidOne) {
  std::string empty = file("empty.json", "").string();
  std::string wrong = file("wrong format.json", "{\n  \"format\": \"x\"\n}\n").string();
  CliResult r = verify("github", {kGood, kBug, empty, wrong});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  std::vector<std::string> errors = lines_starting(r.out, "::error ");
  std::vector<std::string> invalid;
  for (const std::string& e : errors)
    if (e.find("title=shardproof%3A invalid plan") != std::string::npos) invalid.push_back(e);
  ASSERT_EQ(invalid.size(), 2u) << r.out;
  EXPECT_EQ(property(invalid[0], "file"), github_property(empty));
  EXPECT_EQ(property(invalid[1], "file"), github_property(wrong));
  EXPECT_EQ(property(invalid[1], "line"), "2") << invalid[1];  // where "format" is wrong
  EXPECT_GE(errors.size(), 3u) << r.out;                       // and the bug's findings
  // A verdict line per plan, then the batch's summary.
  EXPECT_NE(r.out.find("tp2-ffn.json: EQUIVALENT ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("empty.json: INVALID PLAN"), std::string::npos) << r.out;
  EXPECT_EQ(lines_of(r.out).back(), "4 plans: 1 equivalent, 1 not-equivalent, 2 invalid");
}

// A plan whose logical graph lives in a file of its own: the finding points
// into that file.
TEST_F(CliFormatsTest, GithubPointsIntoAReferencedGraphFile) {
  fs::copy_file(kExamples / "dp2-sgd.logical.json", dir_ / "dp2-sgd.logical.json");
  std::string text = slurp_file(kExamples / "dp2-sgd.json");
  size_t sum = text.find("\"reduce\": \"sum\"");
  ASSERT_NE(sum, std::string::npos);
  text.replace(sum, 15, "\"reduce\": \"mean\"");
  std::string plan = file("dp2-sgd.json", text).string();
  CliResult r = verify("github", {plan});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  std::string graph = (dir_ / "dp2-sgd.logical.json").string();
  std::vector<std::string> errors = lines_starting(r.out, "::error ");
  ASSERT_FALSE(errors.empty()) << r.out;
  for (const std::string& e : errors) {  // at the parallel op, in the plan
    SCOPED_TRACE(e);
    EXPECT_EQ(property(e, "file"), github_property(plan));
    int line = std::atoi(property(e, "line").c_str());
    EXPECT_NE(line_of(plan, line).find("\"name\": "), std::string::npos) << line_of(plan, line);
  }
  // The logical tensor, SARIF's related location, is in the graph file.
  nlohmann::json sarif = nlohmann::json::parse(verify("sarif", {plan}).out);
  for (const nlohmann::json& result : sarif["runs"][0]["results"]) {
    const nlohmann::json& related = result["relatedLocations"][0]["physicalLocation"];
    EXPECT_EQ(related["artifactLocation"]["uri"], "file://" + graph);
    int line = related["region"]["startLine"];
    EXPECT_NE(line_of(graph, line).find("\": {"), std::string::npos) << line_of(graph, line);
  }
}

// ---- junit ----

struct Counts {
  int tests = 0, failures = 0, errors = 0;
  bool operator==(const Counts&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Counts& c) {
  return os << "{tests " << c.tests << ", failures " << c.failures << ", errors " << c.errors
            << "}";
}

Counts said(const xml::Element& e) {
  auto number = [&](const char* key) {
    const std::string* v = e.attribute(key);
    return v ? std::atoi(v->c_str()) : -1;
  };
  return {number("tests"), number("failures"), number("errors")};
}

Counts seen(const xml::Element& suite) {
  Counts c;
  for (const xml::Element* t : suite.children_named("testcase")) {
    ++c.tests;
    c.failures += static_cast<int>(t->children_named("failure").size());
    c.errors += static_cast<int>(t->children_named("error").size());
  }
  return c;
}

// Also through xmllint when it is installed (the checker above always runs).
void expect_xmllint_accepts(const std::string& document, const fs::path& dir) {
  if (std::system("command -v xmllint >/dev/null 2>&1") != 0) return;
  fs::path p = dir / "junit.xml";
  std::ofstream(p, std::ios::binary) << document;
  std::string cmd = "xmllint --noout " + shell_quote(p.string()) + " 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << document;
}

TEST_F(CliFormatsTest, JunitCountsTestsFailuresAndErrors) {
  std::string empty = file("empty.json", "").string();
  CliResult r = verify("junit", {kGood, kBug, empty});
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  xml::Document doc = xml::parse(r.out);
  ASSERT_TRUE(doc.root) << doc.error << "\n" << r.out;
  expect_xmllint_accepts(r.out, dir_);
  ASSERT_EQ(doc.root->name, "testsuites");
  std::vector<const xml::Element*> suites = doc.root->children_named("testsuite");
  ASSERT_EQ(suites.size(), 3u) << r.out;

  Counts total;
  for (const xml::Element* s : suites) {
    EXPECT_EQ(said(*s), seen(*s)) << *s->attribute("name");
    total.tests += seen(*s).tests;
    total.failures += seen(*s).failures;
    total.errors += seen(*s).errors;
  }
  EXPECT_EQ(said(*doc.root), total);

  EXPECT_EQ(*suites[0]->attribute("name"), kGood);
  EXPECT_EQ(seen(*suites[0]), (Counts{1, 0, 0}));
  // The bug: the verdict case and one per failed stage, all failures.
  Counts bug = seen(*suites[1]);
  EXPECT_GE(bug.tests, 2);
  EXPECT_EQ(bug.failures, bug.tests);
  EXPECT_EQ(bug.errors, 0);
  const xml::Element* stage = suites[1]->children_named("testcase").at(1);
  EXPECT_EQ(stage->attribute("name")->rfind("stage ", 0), 0u);
  EXPECT_NE(stage->children_named("failure").at(0)->text.find("logical tensor: out"),
            std::string::npos);
  // The invalid plan: one case, an error.
  EXPECT_EQ(seen(*suites[2]), (Counts{1, 0, 1}));
}

// ---- sarif ----

// A path as the SARIF renderer writes it into a URI: file:// when absolute.
std::string uri_of(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = path.rfind('/', 0) == 0 ? "file://" : "";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

nlohmann::json sarif_results(const CliResult& r) {
  nlohmann::json log = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_FALSE(log.is_discarded()) << r.out;
  if (log.is_discarded()) return nlohmann::json::array();
  EXPECT_EQ(log["version"], "2.1.0");
  EXPECT_TRUE(log.contains("$schema"));
  EXPECT_EQ(log["runs"][0]["tool"]["driver"]["name"], "shardproof");
  return log["runs"][0]["results"];
}

TEST_F(CliFormatsTest, SarifOneResultPerFinding) {
  CliResult json = verify("json", {kBug});
  size_t findings = nlohmann::json::parse(json.out)["findings"].size();
  ASSERT_GT(findings, 0u);

  CliResult r = verify("sarif", {kBug});
  EXPECT_EQ(r.code, 1) << r.err;
  nlohmann::json results = sarif_results(r);
  ASSERT_EQ(results.size(), findings) << r.out;
  for (const auto& result : results) {
    SCOPED_TRACE(result.dump());
    EXPECT_EQ(result["ruleId"], "not-equivalent");
    EXPECT_EQ(result["level"], "error");
    std::string text = result["message"]["text"];
    EXPECT_NE(text.find("logical tensor out"), std::string::npos);
    EXPECT_NE(text.find("ops "), std::string::npos);
    const nlohmann::json& where = result["locations"][0]["physicalLocation"];
    EXPECT_EQ(where["artifactLocation"]["uri"], uri_of(kBug));
    EXPECT_GT(where["region"]["startLine"].get<int>(), 1);
  }
}

TEST_F(CliFormatsTest, SarifCorrectPlanHasNoResultsAndInvalidPlanHasOne) {
  CliResult r = verify("sarif", {kGood});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(sarif_results(r).empty()) << r.out;

  std::string empty = file("empty.json", "").string();
  r = verify("sarif", {kGood, empty});
  EXPECT_EQ(r.code, 2) << r.err;
  nlohmann::json results = sarif_results(r);
  ASSERT_EQ(results.size(), 1u) << r.out;
  EXPECT_EQ(results[0]["ruleId"], "invalid-plan");
  EXPECT_EQ(results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            uri_of(empty));
}

// ---- every format ----

TEST_F(CliFormatsTest, ExitCodesDoNotDependOnTheFormat) {
  std::string empty = file("empty.json", "").string();
  std::string missing = (dir_ / "missing.json").string();
  const std::vector<std::vector<std::string>> batches = {{kGood},
                                                         {kBug},
                                                         {empty},
                                                         {missing},
                                                         {kGood, kBug},
                                                         {kBug, empty, kGood},
                                                         {empty, missing, kBug}};
  const std::vector<int> codes = {0, 1, 2, 2, 1, 2, 2};  // a missing file is invalid input
  for (size_t i = 0; i < batches.size(); ++i) {
    for (const char* format : {"text", "json", "github", "junit", "sarif"}) {
      SCOPED_TRACE(std::string(format) + " batch " + std::to_string(i));
      CliResult r = verify(format, batches[i]);
      EXPECT_EQ(r.code, codes[i]) << r.out << r.err;
      if (std::string(format) == "junit") {
        xml::Document doc = xml::parse(r.out);
        ASSERT_TRUE(doc.root) << doc.error << "\n" << r.out;
        EXPECT_EQ(doc.root->children_named("testsuite").size(), batches[i].size());
      } else if (std::string(format) == "sarif") {
        EXPECT_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded()) << r.out;
      }
    }
  }
}

// The daemon and the engine in process render the same annotations and results.
TEST_F(CliFormatsTest, DaemonAndInProcessRenderAlike) {
  std::string empty = file("empty.json", "").string();
  std::vector<std::string> plans = {kGood, kBug, empty};
  CliResult daemon = verify("github", plans);
  CliResult local = verify("github", plans, "--no-daemon");
  EXPECT_EQ(daemon.code, 2);
  EXPECT_EQ(local.code, 2);
  EXPECT_EQ(lines_starting(daemon.out, "::"), lines_starting(local.out, "::"));
  EXPECT_FALSE(lines_starting(daemon.out, "::").empty());

  daemon = verify("sarif", plans);
  local = verify("sarif", plans, "--no-cache");
  EXPECT_EQ(sarif_results(daemon), sarif_results(local));
}

}  // namespace
