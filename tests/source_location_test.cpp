// Source locations ("src" on ops): a captured plan says which line of the
// user's program made each op. They never change a stage key (a verdict
// cannot depend on them); every finding on such a plan carries them, and
// the text, JSON, GitHub, SARIF and JUnit outputs point at the user's line.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

#include "cli/formats/report_formats.h"
#include "engine/format/plan_parser.h"
#include "engine/report/report_codec.h"
#include "engine/stage/canonical.h"
#include "engine/stage/stage.h"
#include "tests/graph_text.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

json src(int line, const std::string& function = "forward") {
  return {{"file", "model/mlp.py"}, {"line", line}, {"function", function}};
}

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// y = x @ w + b over tp = 2 (row-parallel: w split by rows, x by columns).
// The classic bug adds the bias before the all-reduce, so it is added twice.
// Every op says where it came from when `with_src`.
json row_parallel(bool bias_before_reduce, bool with_src) {
  json logical = {{"tensors",
                   {{"x", tensor({4, 8})},
                    {"w", tensor({8, 4})},
                    {"b", tensor({4})},
                    {"h", tensor({4, 4})},
                    {"y", tensor({4, 4})}}},
                  {"inputs", {"x", "w", "b"}},
                  {"ops",
                   {{{"name", "fc"}, {"op", "matmul"}, {"in", {"x", "w"}}, {"out", {"h"}}},
                    {{"name", "bias"}, {"op", "add"}, {"in", {"h", "b"}}, {"out", {"y"}}}}},
                  {"outputs", {"y"}}};
  if (with_src) {
    logical["ops"][0]["src"] = src(20);
    logical["ops"][1]["src"] = src(21);
  }
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array(), reduce_in = json::array(), reduce_out = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "tp" + std::to_string(r) + ".";
    tensors[p + "x"] =
        tensor({4, 4}, r, {{"tensor", "x"}, {"slice", {{0, 4}, {4 * r, 4 * r + 4}}}});
    tensors[p + "w"] =
        tensor({4, 4}, r, {{"tensor", "w"}, {"slice", {{4 * r, 4 * r + 4}, {0, 4}}}});
    tensors[p + "b"] = tensor({4}, r, {{"tensor", "b"}});
    for (const char* in : {"x", "w", "b"}) inputs.push_back(p + in);
    tensors[p + "h"] = tensor({4, 4}, r, {{"tensor", "h"}, {"part", {r, 2}}});
    tensors[p + "y"] = tensor({4, 4}, r, {{"tensor", "y"}});
    outputs.push_back(p + "y");
    ops.push_back({{"name", p + "fc"},
                   {"op", "matmul"},
                   {"in", {p + "x", p + "w"}},
                   {"out", {p + "h"}},
                   {"src", src(30)}});
    if (bias_before_reduce) {
      tensors[p + "hb"] = tensor({4, 4}, r);
      ops.push_back({{"name", p + "bias"},
                     {"op", "add"},
                     {"in", {p + "h", p + "b"}},
                     {"out", {p + "hb"}},
                     {"src", src(31)}});
      reduce_in.push_back(p + "hb");
      reduce_out.push_back(p + "y");
    } else {
      tensors[p + "s"] = tensor({4, 4}, r);
      reduce_in.push_back(p + "h");
      reduce_out.push_back(p + "s");
      ops.push_back({{"name", p + "bias"},
                     {"op", "add"},
                     {"in", {p + "s", p + "b"}},
                     {"out", {p + "y"}},
                     {"src", src(33)}});
    }
  }
  ops.push_back({{"name", "tp_allreduce"},
                 {"op", "all_reduce"},
                 {"in", reduce_in},
                 {"out", reduce_out},
                 {"group", {0, 1}},
                 {"src", src(32, "reduce")}});
  if (!with_src)
    for (json& op : ops) op.erase("src");
  return {{"format", "shardproof-plan/1"},
          {"logical", logical},
          {"parallel",
           {{"world", 2},
            {"tensors", tensors},
            {"inputs", inputs},
            {"ops", ops},
            {"outputs", outputs}}}};
}

TEST(SourceLocation, OpsKeepTheirSourceAndOneLineSharesOneRecord) {
  Plan plan = testing::parse(row_parallel(false, true));
  const Op& fc0 = plan.parallel.ops[plan.parallel.ops[0].name == "tp0.fc" ? 0 : 1];
  ASSERT_TRUE(fc0.src);
  EXPECT_EQ(fc0.src->file, "model/mlp.py");
  EXPECT_EQ(fc0.src->line, 30);
  EXPECT_EQ(fc0.src->function, "forward");
  // tp0.fc and tp1.fc come from line 30: one shared record.
  std::shared_ptr<const SourceRef> first;
  for (const Op& op : plan.parallel.ops) {
    if (op.op != "matmul") continue;
    if (!first) first = op.src;
    EXPECT_EQ(op.src.get(), first.get());
  }
  ASSERT_TRUE(plan.logical.ops[0].src);
  EXPECT_EQ(source_to_string(*plan.logical.ops[0].src), "model/mlp.py:20 (forward)");
}

TEST(SourceLocation, NeverPartOfAStageKey) {
  Plan with = testing::parse(row_parallel(true, true));
  Plan without = testing::parse(row_parallel(true, false));
  std::vector<Stage> a = build_stages(with), b = build_stages(without);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(stage_key(a[i]), stage_key(b[i])) << a[i].title;
    EXPECT_EQ(canonical_bytes(a[i]), canonical_bytes(b[i])) << a[i].title;
  }
}

std::string invalid_src(const json& value, std::string* message) {
  json plan = row_parallel(false, true);
  plan["parallel"]["ops"][0]["src"] = value;
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "");
  if (!r.error) return "(valid)";
  *message = r.error->to_string();
  return r.error->rule;
}

TEST(SourceLocation, AMalformedSourceIsInvalidWithItsPointer) {
  for (const json& bad :
       {json("mlp.py:3"), json{{"file", "mlp.py"}}, json{{"line", 3}},
        json{{"file", "mlp.py"}, {"line", 0}}, json{{"file", ""}, {"line", 3}},
        json{{"file", "mlp.py"}, {"line", "3"}}, json{{"file", "mlp.py"}, {"line", 3}, {"col", 1}},
        json{{"file", 7}, {"line", 3}}, json{{"file", "m.py"}, {"line", 3}, {"function", 1}}}) {
    std::string message;
    const std::string rule = invalid_src(bad, &message);
    EXPECT_TRUE(rule == "src" || rule == "unknown-key") << bad.dump() << ": " << rule;
    EXPECT_NE(message.find("/parallel/ops/0/src"), std::string::npos) << message;
  }
  std::string message;
  EXPECT_EQ(invalid_src(json{{"file", "m.py"}, {"line", 3}}, &message), "(valid)");
}

TEST(SourceLocation, AFindingCarriesTheSourcesOfItsOps) {
  Report r = testing::verify_json(row_parallel(true, true), "src-bug");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings.front();
  ASSERT_FALSE(f.sources.empty()) << testing::explain(r);
  std::set<int64_t> lines;
  for (const SourceRef& s : f.sources) {
    EXPECT_EQ(s.file, "model/mlp.py");
    lines.insert(s.line);
  }
  // The all-reduce and the early bias (lines 32, 31), and the logical bias (21).
  EXPECT_TRUE(lines.count(32)) << testing::explain(r);
  EXPECT_TRUE(lines.count(31)) << testing::explain(r);
  EXPECT_TRUE(lines.count(21)) << testing::explain(r);
  EXPECT_NE(report_to_text(r).find("    at model/mlp.py:32 (reduce)"), std::string::npos)
      << testing::explain(r);

  // The same plan without "src": the same verdict, no sources.
  Report plain = testing::verify_json(row_parallel(true, false), "src-none");
  ASSERT_EQ(plain.verdict, Verdict::NotEquivalent);
  for (const Finding& g : plain.findings) EXPECT_TRUE(g.sources.empty());
  EXPECT_EQ(report_to_text(plain).find("    at "), std::string::npos);

  // The correct plan with sources is proven.
  Report ok = testing::verify_json(row_parallel(false, true), "src-ok");
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
}

TEST(SourceLocation, SourcesCrossTheReportCodec) {
  Report r = testing::verify_json(row_parallel(true, true), "src-codec");
  ASSERT_FALSE(r.findings.empty());
  const json j = report_to_json(r);
  ASSERT_TRUE(j["findings"][0].contains("sources"));
  std::optional<Report> back = report_from_json(j);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->findings.size(), r.findings.size());
  const std::vector<SourceRef>& a = r.findings[0].sources;
  const std::vector<SourceRef>& b = back->findings[0].sources;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].file, b[i].file);
    EXPECT_EQ(a[i].line, b[i].line);
    EXPECT_EQ(a[i].function, b[i].function);
  }
  // A report without sources has no "sources" key (its JSON is unchanged).
  Report plain = testing::verify_json(row_parallel(true, false), "src-codec-none");
  ASSERT_FALSE(plain.findings.empty());
  EXPECT_FALSE(report_to_json(plain)["findings"][0].contains("sources"));
}

TEST(SourceLocation, CiFormatsPointAtTheUsersLine) {
  Report r = testing::verify_json(row_parallel(true, true), "src-ci");
  ASSERT_FALSE(r.findings.empty());
  const SourceRef first = r.findings[0].sources.at(0);
  const std::string text = row_parallel(true, true).dump(1);
  cli::LocatedReport located = cli::locate_report(r, &text);
  ASSERT_EQ(located.findings.size(), r.findings.size());
  EXPECT_EQ(located.findings[0].file, "model/mlp.py");
  EXPECT_EQ(located.findings[0].line, first.line);

  const std::string github = cli::render_github(located);
  EXPECT_NE(github.find("file=model/mlp.py,line=" + std::to_string(first.line)), std::string::npos)
      << github;

  const json sarif = json::parse(cli::render_sarif({located}));
  const json& result = sarif["runs"][0]["results"][0];
  const json& physical = result["locations"][0]["physicalLocation"];
  EXPECT_EQ(physical["artifactLocation"]["uri"], "model/mlp.py") << result.dump(1);
  EXPECT_EQ(physical["region"]["startLine"], first.line) << result.dump(1);
  // Related: the logical tensor's declaration in the plan (id 0), then the
  // further source lines.
  const json& related = result["relatedLocations"];
  ASSERT_EQ(related.size(), r.findings[0].sources.size()) << result.dump(1);
  EXPECT_EQ(related[0]["id"], 0);
  EXPECT_EQ(related[0]["message"]["text"], "logical tensor " + r.findings[0].tensor);
  for (size_t i = 1; i < related.size(); ++i)
    EXPECT_EQ(related[i]["physicalLocation"]["region"]["startLine"], r.findings[0].sources[i].line);

  const std::string junit = cli::render_junit({located});
  EXPECT_NE(junit.find("file=\"model/mlp.py\" line=\"" + std::to_string(first.line) + "\""),
            std::string::npos)
      << junit;
}

}  // namespace
}  // namespace shardproof
