// The CI formats of `verify` on hand-built reports: GitHub workflow commands
// and their escaping, JUnit XML (well-formed, counts), SARIF 2.1.0, and the
// lines findings are located at. docs/cli.md describes the formats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/formats/report_formats.h"
#include "tests/xml_check.h"

namespace shardproof::cli {
namespace {

namespace fs = std::filesystem;
namespace xml = shardproof::testing::xml;

Finding finding(const std::string& stage, const std::string& tensor, const std::string& kind) {
  Finding f;
  f.kind = kind;
  f.stage = stage;
  f.tensor = tensor;
  f.parallel_tensors = {"tp0." + tensor};
  f.elements = {{0, 0}, {0, 1}};
  f.ops = {"ffn.down.all_reduce"};
  f.message = "tp0." + tensor + " differs from " + tensor + " at 2 of 4 checked elements";
  return f;
}

Report report(const std::string& path, Verdict verdict, std::vector<Finding> findings = {}) {
  Report r;
  r.plan_path = path;
  r.verdict = verdict;
  r.findings = std::move(findings);
  r.stats.stages = 4;
  r.stats.unique_stages = 4;
  r.stats.seconds = 0.25;
  return r;
}

Report invalid_report(const std::string& path) {
  Report r = report(path, Verdict::Invalid);
  Diagnostic d;
  d.rule = "shape";
  d.file = path;
  d.pointer = "/parallel/ops/3";
  d.line = 12;
  d.column = 7;
  d.message = "matmul: inner dimensions 4 and 8 differ";
  r.invalid = d;
  return r;
}

LocatedReport located(Report r) {
  return locate_report(std::move(r), nullptr);
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  return out;
}

// ---- locations ----

// Line numbers in a small plan: the logical graph inline, "out" on line 6,
// "p.out" on line 12, the named op's "name" on line 15, the unnamed op
// starting on line 16.
const char* kPlanText = R"({
 "format": "shardproof-plan/1",
 "logical": {
  "tensors": {
   "x": {"shape": [2], "dtype": "f32"},
   "out": {"shape": [2], "dtype": "f32"}
  },
  "ops": [{"op": "neg", "in": ["x"], "out": ["out"], "name": "n"}]
 },
 "parallel": {
  "world": 1,
  "tensors": {"p.out": {"shape": [2], "dtype": "f32", "rank": 0}},
  "ops": [
   {"op": "neg", "in": ["p.x"], "out": ["p.y"],
    "name": "p.neg"},
   {"op": "neg", "in": ["p.y"], "out": ["p.out"]}
  ]
 }
}
)";

TEST(PlanLocations, OpThenParallelTensorThenLogicalTensor) {
  std::string text = kPlanText;
  Finding by_tensor = finding("stage 1: out[0:2]", "out", "mismatch");
  Finding by_op = by_tensor;
  by_op.tensor = "not-declared";
  by_op.ops = {"not-an-op", "p.neg"};
  Finding by_unnamed_op = by_op;
  by_unnamed_op.ops = {"#1 neg"};
  Finding by_parallel_tensor = by_op;
  by_parallel_tensor.ops = {};
  by_parallel_tensor.parallel_tensors = {"p.out"};
  Finding nowhere = by_parallel_tensor;
  nowhere.parallel_tensors = {"q"};
  LocatedReport r =
      locate_report(report("dir/plan.json", Verdict::NotEquivalent,
                           {by_tensor, by_op, by_unnamed_op, by_parallel_tensor, nowhere}),
                    &text);
  ASSERT_EQ(r.findings.size(), 5u);
  EXPECT_EQ(r.findings[0].file, "dir/plan.json");
  EXPECT_EQ(r.findings[0].line, 6);
  EXPECT_EQ(r.findings[0].column, 4);
  EXPECT_EQ(r.findings[1].line, 15);  // the op's "name" key
  EXPECT_EQ(r.findings[2].line, 16);  // the unnamed op's start
  EXPECT_EQ(r.findings[3].line, 12);
  EXPECT_EQ(r.findings[4].file, "dir/plan.json");
  EXPECT_EQ(r.findings[4].line, 1);
  EXPECT_EQ(r.plan.file, "dir/plan.json");
  EXPECT_EQ(r.plan.line, 1);
}

// What a reviewer edits is the parallel op: the finding is placed there, and
// its logical tensor's declaration and both ops' text are kept beside it.
TEST(PlanLocations, ProducingOpFirstLogicalTensorApart) {
  std::string text = kPlanText;
  Finding f = finding("stage 1: out[0:2]", "out", "mismatch");
  f.ops = {"p.neg"};
  LocatedReport r = locate_report(report("dir/plan.json", Verdict::NotEquivalent, {f}), &text);
  EXPECT_EQ(r.findings[0].line, 15);
  ASSERT_EQ(r.logical_tensors.size(), 1u);
  EXPECT_EQ(r.logical_tensors[0].file, "dir/plan.json");
  EXPECT_EQ(r.logical_tensors[0].line, 6);
  ASSERT_EQ(r.ops[0].logical.size(), 1u);
  EXPECT_NE(r.ops[0].logical[0].find("\"name\":\"n\""), std::string::npos) << r.ops[0].logical[0];
  ASSERT_EQ(r.ops[0].parallel.size(), 1u);
  EXPECT_NE(r.ops[0].parallel[0].find("\"p.neg\""), std::string::npos);
  // Not read: nothing related.
  EXPECT_TRUE(
      located(report("p.json", Verdict::NotEquivalent, {f})).logical_tensors[0].file.empty());
}

TEST(PlanLocations, GraphFileReferences) {
  fs::path dir = fs::temp_directory_path() / ("shardproof_locations_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "logical.json") << "{\n \"tensors\": {\n  \"x\": {},\n  \"out\": {}\n }\n}\n";
  std::string text = R"({"format": "shardproof-plan/1", "logical": "logical.json"})";
  std::string plan = (dir / "plan.json").string();
  LocatedReport r = locate_report(
      report(plan, Verdict::NotEquivalent, {finding("stage 1", "out", "mismatch")}), &text);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_EQ(r.findings[0].file, (dir / "logical.json").string());
  EXPECT_EQ(r.findings[0].line, 4);
  fs::remove_all(dir);
}

TEST(PlanLocations, GarbageTextFallsBackToLineOne) {
  std::string text = "{\"logical\": [1, 2";
  LocatedReport r = locate_report(
      report("p.json", Verdict::NotEquivalent, {finding("s", "out", "mismatch")}), &text);
  EXPECT_EQ(r.findings[0].file, "p.json");
  EXPECT_EQ(r.findings[0].line, 1);
}

TEST(PlanLocations, InvalidPlanIsWhereTheDiagnosticPoints) {
  Report bad = invalid_report("bad.json");
  bad.invalid->file = "graph.json";
  LocatedReport r = located(bad);
  EXPECT_EQ(r.plan.file, "graph.json");
  EXPECT_EQ(r.plan.line, 12);
  EXPECT_EQ(r.plan.column, 7);
  EXPECT_EQ(located(report("gone.json", Verdict::InternalError)).plan.line, 0);
}

TEST(FindingSummary, OneLineWithEveryField) {
  EXPECT_EQ(finding_summary(finding("stage 1: out[0:2]", "out", "mismatch")),
            "mismatch in stage 1: out[0:2]: logical tensor out; elements [0, 0] [0, 1]; "
            "parallel tensors tp0.out; ops ffn.down.all_reduce. tp0.out differs from out at 2 "
            "of 4 checked elements");
  Finding bare;
  bare.kind = "coverage";
  EXPECT_EQ(finding_summary(bare), "coverage");
}

// ---- github ----

TEST(GithubFormat, OneErrorPerFindingWithTheFileAndLine) {
  std::string text = kPlanText;
  LocatedReport r = locate_report(report("plan.json", Verdict::NotEquivalent,
                                         {finding("stage 1: out[0:2]", "out", "mismatch"),
                                          finding("stage 2: x[0:2]", "x", "mismatch")}),
                                  &text);
  std::string out = render_github(r);
  EXPECT_EQ(out.substr(0, out.find('\n')), report_headline(r.report));
  std::vector<std::string> errors = lines_starting(out, "::error ");
  ASSERT_EQ(errors.size(), 2u) << out;
  EXPECT_EQ(errors[0].rfind(
                "::error file=plan.json,line=6,col=4,title=shardproof%3A not equivalent::", 0),
            0u)
      << errors[0];
  EXPECT_NE(errors[0].find("logical tensor out"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("ops ffn.down.all_reduce"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("line=5,"), std::string::npos) << errors[1];
  EXPECT_TRUE(lines_starting(out, "::warning").empty()) << out;
}

TEST(GithubFormat, EscapesDataAndProperties) {
  Finding f = finding("stage 1: a[0:2]", "a", "mismatch");
  f.message = "100% wrong\r\nsecond line: a, b";
  LocatedReport r = located(report("dir,1/p:lan%.json", Verdict::NotEquivalent, {f}));
  std::string out = render_github(r);
  std::vector<std::string> errors = lines_starting(out, "::error ");
  ASSERT_EQ(errors.size(), 1u) << out;
  const std::string& e = errors[0];
  EXPECT_EQ(e.rfind("::error file=dir%2C1/p%3Alan%25.json,line=1,title=", 0), 0u) << e;
  // Data: % CR LF escaped, ":" and "," kept.
  EXPECT_NE(e.find("100%25 wrong%0D%0Asecond line: a, b"), std::string::npos) << e;
  // Exactly the headline and the command: nothing broke onto a new line.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

// GitHub shows 10 annotations per step: the rest stay in the log as plain
// lines and one notice counts them, whichever plan they belong to.
TEST(GithubFormat, AtMostTenAnnotationsPerStepThenOneNotice) {
  std::vector<Finding> seven(7, finding("stage 1", "out", "mismatch"));
  GithubAnnotations step;
  std::string out = step.render(located(report("a.json", Verdict::NotEquivalent, seven)));
  out += step.render(located(report("b.json", Verdict::NotEquivalent, seven)));
  out += step.finish();
  EXPECT_EQ(lines_starting(out, "::error ").size(), 10u) << out;
  EXPECT_EQ(lines_starting(out, "b.json:1: shardproof: not equivalent: mismatch").size(), 4u);
  std::vector<std::string> notices = lines_starting(out, "::notice ");
  ASSERT_EQ(notices.size(), 1u) << out;
  EXPECT_NE(notices[0].find("4 more problems not annotated"), std::string::npos) << notices[0];
  EXPECT_EQ(step.finish(), "");

  GithubAnnotations exact;
  out = exact.render(
      located(report("c.json", Verdict::NotEquivalent, std::vector<Finding>(10, seven[0]))));
  out += exact.finish();
  EXPECT_EQ(lines_starting(out, "::error ").size(), 10u);
  EXPECT_TRUE(lines_starting(out, "::notice ").empty()) << out;
}

TEST(StepSummary, VerdictsAndAFindingsTable) {
  Finding f = finding("stage 1", "out", "mismatch");
  f.message = "a | b\nc";
  std::string md = render_step_summary({located(report("ok.json", Verdict::Equivalent)),
                                        located(report("bad.json", Verdict::NotEquivalent, {f})),
                                        located(invalid_report("inv.json"))});
  EXPECT_NE(md.find("- ✅ ok.json: EQUIVALENT"), std::string::npos) << md;
  EXPECT_NE(md.find("- ❌ bad.json: NOT EQUIVALENT"), std::string::npos) << md;
  EXPECT_NE(md.find("[shape] matmul: inner dimensions"), std::string::npos) << md;
  EXPECT_NE(md.find("| plan | kind | stage | logical tensor | where | ranks | finding |"),
            std::string::npos);
  EXPECT_NE(md.find("| bad.json | mismatch | stage 1 | `out` | `bad.json:1` | ranks not known | "
                    "a \\| b c |"),
            std::string::npos)
      << md;
  EXPECT_EQ(render_step_summary({located(report("ok.json", Verdict::Equivalent))}).find("| plan"),
            std::string::npos);
}

TEST(GithubFormat, EquivalentHasNoCommands) {
  std::string out = render_github(located(report("ok.json", Verdict::Equivalent)));
  EXPECT_EQ(out, report_headline(report("ok.json", Verdict::Equivalent)) + "\n");
  EXPECT_EQ(out.find("::"), std::string::npos);
}

TEST(GithubFormat, InvalidPlanAndInternalErrorAreErrors) {
  std::string out = render_github(located(invalid_report("bad.json")));
  std::vector<std::string> errors = lines_starting(out, "::error ");
  ASSERT_EQ(errors.size(), 1u) << out;
  EXPECT_EQ(errors[0],
            "::error file=bad.json,line=12,col=7,title=shardproof%3A invalid plan [shape]::"
            "/parallel/ops/3: matmul: inner dimensions 4 and 8 differ");

  Report gone = report("gone.json", Verdict::InternalError);
  gone.error = "cannot read gone.json: No such file or directory";
  errors = lines_starting(render_github(located(gone)), "::error ");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("::error file=gone.json,title=shardproof%3A internal error::", 0), 0u)
      << errors[0];
}

TEST(GithubFormat, UnknownIsAWarning) {
  std::string out = render_github(
      located(report("u.json", Verdict::Unknown, {finding("stage 1", "out", "unknown")})));
  EXPECT_TRUE(lines_starting(out, "::error").empty()) << out;
  EXPECT_EQ(lines_starting(out, "::warning ").size(), 1u) << out;
  // An unknown verdict without findings still warns once.
  out = render_github(located(report("u.json", Verdict::Unknown)));
  EXPECT_EQ(lines_starting(out, "::warning ").size(), 1u) << out;
}

// ---- junit ----

struct Counts {
  int tests = -1, failures = -1, errors = -1;
};

Counts counts_of(const xml::Element& e) {
  auto number = [&](const char* key) {
    const std::string* v = e.attribute(key);
    return v ? std::stoi(*v) : -1;
  };
  return {number("tests"), number("failures"), number("errors")};
}

// Counts what the test cases say, and checks the suite says the same.
Counts check_suite(const xml::Element& suite) {
  Counts seen{0, 0, 0};
  for (const xml::Element* c : suite.children_named("testcase")) {
    ++seen.tests;
    seen.failures += static_cast<int>(c->children_named("failure").size());
    seen.errors += static_cast<int>(c->children_named("error").size());
    EXPECT_LE(c->children_named("failure").size() + c->children_named("error").size(), 1u);
  }
  Counts said = counts_of(suite);
  EXPECT_EQ(said.tests, seen.tests);
  EXPECT_EQ(said.failures, seen.failures);
  EXPECT_EQ(said.errors, seen.errors);
  return seen;
}

TEST(JunitFormat, SuitesCasesAndCounts) {
  Report bug = report("bug.json", Verdict::NotEquivalent,
                      {finding("stage 3: out[0:8]", "out", "mismatch"),
                       finding("stage 3: out[0:8]", "out", "mismatch"),
                       finding("stage 1: up[0:8]", "up", "mismatch")});
  Report gone = report("gone.json", Verdict::InternalError);
  gone.error = "cannot read gone.json";
  std::vector<LocatedReport> reports = {
      located(report("ok.json", Verdict::Equivalent)), located(bug),
      located(invalid_report("bad.json")), located(gone),
      located(report("u.json", Verdict::Unknown, {finding("stage 2", "out", "unknown")}))};
  std::string out = render_junit(reports);
  xml::Document doc = xml::parse(out);
  ASSERT_TRUE(doc.root) << doc.error << "\n" << out;
  EXPECT_EQ(doc.root->name, "testsuites");
  std::vector<const xml::Element*> suites = doc.root->children_named("testsuite");
  ASSERT_EQ(suites.size(), 5u) << out;

  std::vector<Counts> expected = {{1, 0, 0}, {3, 3, 0}, {1, 0, 1}, {1, 0, 1}, {2, 2, 0}};
  Counts total{0, 0, 0};
  for (size_t i = 0; i < suites.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(*suites[i]->attribute("name"), reports[i].report.plan_path);
    Counts c = check_suite(*suites[i]);
    EXPECT_EQ(c.tests, expected[i].tests);
    EXPECT_EQ(c.failures, expected[i].failures);
    EXPECT_EQ(c.errors, expected[i].errors);
    total.tests += c.tests;
    total.failures += c.failures;
    total.errors += c.errors;
  }
  Counts said = counts_of(*doc.root);
  EXPECT_EQ(said.tests, total.tests);
  EXPECT_EQ(said.failures, total.failures);
  EXPECT_EQ(said.errors, total.errors);

  // The bug: the verdict case, then one per failed stage, in report order,
  // the stage's findings together in the failure's body.
  std::vector<const xml::Element*> cases = suites[1]->children_named("testcase");
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(*cases[0]->attribute("name"), "equivalence");
  EXPECT_EQ(*cases[1]->attribute("name"), "stage 3: out[0:8]");
  EXPECT_EQ(*cases[2]->attribute("name"), "stage 1: up[0:8]");
  const xml::Element* failure = cases[1]->children_named("failure").at(0);
  EXPECT_NE(failure->attribute("message")->find("(+1 more finding)"), std::string::npos);
  EXPECT_EQ(*failure->attribute("type"), "mismatch");
  EXPECT_EQ(failure->text, finding_to_text(bug.findings[0]) + finding_to_text(bug.findings[1]));
  // The verdict's case lists every finding on one line.
  const xml::Element* verdict = cases[0]->children_named("failure").at(0);
  EXPECT_EQ(*verdict->attribute("message"), "not equivalent: 3 findings in 2 stages");
  for (const Finding& f : bug.findings)
    EXPECT_NE(verdict->text.find(finding_summary(f)), std::string::npos) << verdict->text;
  // The invalid plan's error names the rule and place.
  const xml::Element* error = suites[2]->children_named("testcase")[0]->children_named("error")[0];
  EXPECT_NE(error->attribute("message")->find("bad.json:12:7"), std::string::npos);
}

TEST(JunitFormat, EscapesWhatXmlCannotHoldRaw) {
  Finding f = finding("stage 1: a<b>&\"c\"", "a'b", "mismatch");
  f.message = std::string("bytes \x01\x1f and \xff\xfe, tab\there\nand ]]> end");
  Report r = report("p&<q>\".json", Verdict::NotEquivalent, {f});
  std::string out = render_junit({located(r)});
  xml::Document doc = xml::parse(out);
  ASSERT_TRUE(doc.root) << doc.error << "\n" << out;
  const xml::Element* suite = doc.root->children_named("testsuite").at(0);
  EXPECT_EQ(*suite->attribute("name"), "p&<q>\".json");
  const xml::Element* stage = suite->children_named("testcase").at(1);
  EXPECT_EQ(*stage->attribute("name"), "stage 1: a<b>&\"c\"");
  const std::string& message = *stage->children_named("failure").at(0)->attribute("message");
  // Control characters and bytes that are not UTF-8 are replaced; the tab
  // and the line break survive attribute normalisation.
  EXPECT_NE(
      message.find(
          "bytes \xEF\xBF\xBD\xEF\xBF\xBD and \xEF\xBF\xBD\xEF\xBF\xBD, tab\there\nand ]]> end"),
      std::string::npos)
      << message;
}

TEST(JunitFormat, NoPlansIsAnEmptyDocument) {
  xml::Document doc = xml::parse(render_junit({}));
  ASSERT_TRUE(doc.root) << doc.error;
  EXPECT_EQ(counts_of(*doc.root).tests, 0);
}

TEST(XmlCheck, RejectsWhatIsNotWellFormed) {
  EXPECT_TRUE(xml::parse("<a x=\"1\"><b/>t &amp; &#10;</a>").root);
  for (const char* bad : {"<a>", "<a></b>", "<a x=1/>", "<a x=\"<\"/>", "<a>&</a>", "<a>&nbsp;</a>",
                          "<a x=\"1\" x=\"2\"/>", "<a/><b/>", "<a>\x01</a>", "<a>\xff</a>",
                          "<a>]]></a>", "<a>&#0;</a>", "text"}) {
    EXPECT_FALSE(xml::parse(bad).root) << bad;
  }
}

// ---- sarif ----

TEST(SarifFormat, OneResultPerProblemWithRulesAndLocations) {
  std::string text = kPlanText;
  Report bug = report("plans/a b.json", Verdict::NotEquivalent,
                      {finding("stage 1: out[0:2]", "out", "mismatch"),
                       finding("stage 2: x[0:2]", "x", "unknown")});
  Report gone = report("/data/gone:1.json", Verdict::InternalError);
  gone.error = "cannot read /data/gone:1.json";
  std::string out =
      render_sarif({locate_report(bug, &text), located(report("ok.json", Verdict::Equivalent)),
                    located(invalid_report("bad.json")), located(gone)});
  nlohmann::json log = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(log.is_discarded()) << out;
  EXPECT_EQ(log["version"], "2.1.0");
  EXPECT_TRUE(log["$schema"].get<std::string>().find("sarif") != std::string::npos);
  ASSERT_EQ(log["runs"].size(), 1u);
  const nlohmann::json& run = log["runs"][0];
  EXPECT_EQ(run["tool"]["driver"]["name"], "shardproof");
  EXPECT_EQ(run["tool"]["driver"]["version"], SHARDPROOF_VERSION);
  const nlohmann::json& rules = run["tool"]["driver"]["rules"];
  std::vector<std::string> ids;
  for (const auto& rule : rules) ids.push_back(rule["id"]);
  EXPECT_EQ(ids, (std::vector<std::string>{"not-equivalent", "unknown", "invalid-plan",
                                           "internal-error"}));

  const nlohmann::json& results = run["results"];
  ASSERT_EQ(results.size(), 4u) << results.dump(2);
  for (const auto& result : results) {
    SCOPED_TRACE(result.dump());
    int index = result["ruleIndex"];
    EXPECT_EQ(rules.at(index)["id"], result["ruleId"]);
    EXPECT_FALSE(result["message"]["text"].get<std::string>().empty());
    EXPECT_TRUE(result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].is_string());
  }
  EXPECT_EQ(results[0]["ruleId"], "not-equivalent");
  EXPECT_EQ(results[0]["level"], "error");
  EXPECT_EQ(results[0]["message"]["text"], finding_summary(bug.findings[0]));
  const nlohmann::json& where = results[0]["locations"][0]["physicalLocation"];
  EXPECT_EQ(where["artifactLocation"]["uri"], "plans/a%20b.json");
  EXPECT_EQ(where["region"]["startLine"], 6);
  EXPECT_EQ(results[0]["properties"]["tensor"], "out");
  EXPECT_EQ(results[1]["ruleId"], "unknown");
  EXPECT_EQ(results[1]["level"], "warning");
  EXPECT_EQ(results[2]["ruleId"], "invalid-plan");
  EXPECT_EQ(results[2]["locations"][0]["physicalLocation"]["region"]["startLine"], 12);
  EXPECT_EQ(results[3]["ruleId"], "internal-error");
  EXPECT_EQ(results[3]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            "file:///data/gone%3A1.json");
  EXPECT_FALSE(results[3]["locations"][0]["physicalLocation"].contains("region"));
  EXPECT_EQ(run["invocations"][0]["executionSuccessful"], false);
}

TEST(SarifFormat, ResultAtTheOpLogicalTensorRelated) {
  std::string text = kPlanText;
  Finding f = finding("stage 1: out[0:2]", "out", "mismatch");
  f.ops = {"p.neg"};
  nlohmann::json log = nlohmann::json::parse(
      render_sarif({locate_report(report("plan.json", Verdict::NotEquivalent, {f}), &text)}));
  const nlohmann::json& result = log["runs"][0]["results"][0];
  EXPECT_EQ(result["locations"][0]["physicalLocation"]["region"]["startLine"], 15);
  ASSERT_EQ(result["relatedLocations"].size(), 1u) << result.dump(2);
  const nlohmann::json& related = result["relatedLocations"][0];
  EXPECT_EQ(related["id"], 0);
  EXPECT_EQ(related["physicalLocation"]["artifactLocation"]["uri"], "plan.json");
  EXPECT_EQ(related["physicalLocation"]["region"]["startLine"], 6);
  EXPECT_EQ(related["message"]["text"], "logical tensor out");
}

TEST(SarifFormat, EquivalentHasNoResultsAndBadBytesStayJson) {
  nlohmann::json log = nlohmann::json::parse(
      render_sarif({located(report("ok.json", Verdict::Equivalent))}), nullptr, false);
  ASSERT_FALSE(log.is_discarded());
  EXPECT_TRUE(log["runs"][0]["results"].empty());
  EXPECT_EQ(log["runs"][0]["invocations"][0]["executionSuccessful"], true);

  Report bad = invalid_report("bad.json");
  bad.invalid->message = "found \"\xff\xfe\"";
  log = nlohmann::json::parse(render_sarif({located(bad)}), nullptr, false);
  EXPECT_FALSE(log.is_discarded());
}

}  // namespace
}  // namespace shardproof::cli
