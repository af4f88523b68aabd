// Report rendering on hand-built Reports: verdict names, exit codes, the
// combining order, and the text and JSON forms documented in docs/cli.md.
#include <gtest/gtest.h>

#include <string>

#include "engine/report/report.h"
#include "engine/report/report_codec.h"

namespace shardproof {
namespace {

Report mismatch_report() {
  Report r;
  r.plan_path = "tp2-ffn-bug-mean.json";
  r.plan_name = "ffn, tp2, partial outputs averaged instead of summed";
  r.meta = {{"tp", 2}};
  r.verdict = Verdict::NotEquivalent;
  r.stats.stages = 3;
  r.stats.unique_stages = 2;
  r.stats.solved = 1;
  r.stats.proven_trivially = 1;
  r.stats.logical_ops = 3;
  r.stats.parallel_ops = 7;
  r.stats.seconds = 0.414;
  Finding f;
  f.kind = "mismatch";
  f.stage = "stage 3: out[0:8, 0:16]";
  f.tensor = "out";
  f.parallel_tensors = {"tp0.out", "tp1.out"};
  f.elements = {{0, 0}, {0, 1}};
  f.ops = {"ar.out (all_reduce)"};
  f.counterexample = {{"tp0.part", {{1, 0}, {0, 2}}}, {"expected", {{3}}}};
  f.message = "out differs from the mean of its parts";
  r.findings.push_back(f);
  return r;
}

TEST(Verdict, NamesAreTheDocumentedOnes) {
  EXPECT_STREQ(verdict_name(Verdict::Equivalent), "equivalent");
  EXPECT_STREQ(verdict_name(Verdict::NotEquivalent), "not-equivalent");
  EXPECT_STREQ(verdict_name(Verdict::Invalid), "invalid");
  EXPECT_STREQ(verdict_name(Verdict::Unknown), "unknown");
  EXPECT_STREQ(verdict_name(Verdict::InternalError), "internal-error");
}

TEST(Verdict, ExitCodes) {
  EXPECT_EQ(verdict_exit_code(Verdict::Equivalent), 0);
  EXPECT_EQ(verdict_exit_code(Verdict::NotEquivalent), 1);
  EXPECT_EQ(verdict_exit_code(Verdict::Invalid), 2);
  EXPECT_EQ(verdict_exit_code(Verdict::Unknown), 3);
  EXPECT_EQ(verdict_exit_code(Verdict::InternalError), 4);
}

TEST(Verdict, SeverityOrder) {
  // internal > invalid > not-equivalent > unknown > equivalent
  EXPECT_GT(verdict_severity(Verdict::InternalError), verdict_severity(Verdict::Invalid));
  EXPECT_GT(verdict_severity(Verdict::Invalid), verdict_severity(Verdict::NotEquivalent));
  EXPECT_GT(verdict_severity(Verdict::NotEquivalent), verdict_severity(Verdict::Unknown));
  EXPECT_GT(verdict_severity(Verdict::Unknown), verdict_severity(Verdict::Equivalent));
}

TEST(ReportText, VerdictLineThenFinding) {
  std::string text = report_to_text(mismatch_report());
  std::string first_line = text.substr(0, text.find('\n'));
  EXPECT_EQ(first_line,
            "tp2-ffn-bug-mean.json: NOT EQUIVALENT (3 stages, 2 distinct: 1 trivial, 1 solved, 0 "
            "cached; 0.41 s)");
  EXPECT_NE(text.find("stage 3: out[0:8, 0:16]"), std::string::npos) << text;
  EXPECT_NE(text.find("logical tensor: out"), std::string::npos) << text;
  EXPECT_NE(text.find("[0, 0] [0, 1]"), std::string::npos) << text;
  EXPECT_NE(text.find("tp0.out, tp1.out"), std::string::npos) << text;
  EXPECT_NE(text.find("ar.out (all_reduce)"), std::string::npos) << text;
  EXPECT_NE(text.find("tp0.part = [[1,0],[0,2]]"), std::string::npos) << text;
  EXPECT_NE(text.find("out differs from the mean of its parts"), std::string::npos) << text;
}

TEST(ReportText, EquivalentIsOneLine) {
  Report r;
  r.plan_path = "a.json";
  r.verdict = Verdict::Equivalent;
  r.stats.stages = 1;
  r.stats.unique_stages = 1;
  r.stats.cached = 1;
  r.stats.seconds = 0.004;
  EXPECT_EQ(report_to_text(r),
            "a.json: EQUIVALENT (1 stage, 1 distinct: 0 trivial, 0 solved, 1 cached; 0.00 s)\n");
}

// An undecided plan whose claim inference did not run says why (a captured
// program at production sizes has no claims on its intermediates), in text
// and JSON and through the daemon's codec; a proven one stays one line.
TEST(ReportText, AnUndecidedPlanSaysClaimInferenceWasSkipped) {
  Report r;
  r.plan_path = "big.json";
  r.verdict = Verdict::Unknown;
  r.stats.stages = 1;
  r.stats.unique_stages = 1;
  r.stats.untried = 1;
  r.stats.inference_skipped = "the plan holds 90000000 elements (limit 20000000)";
  const std::string text = report_to_text(r);
  EXPECT_NE(text.find("claims on intermediates were not inferred (the plan holds 90000000 "
                      "elements (limit 20000000)), so a stage spans the whole step"),
            std::string::npos)
      << text;
  const std::optional<Report> back = report_from_json(report_to_json(r));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->stats.inference_skipped, r.stats.inference_skipped);
  r.verdict = Verdict::Equivalent;
  EXPECT_EQ(report_to_text(r).find("not inferred"), std::string::npos);
  r.stats.inference_skipped.clear();
  EXPECT_FALSE(report_to_json(r)["stats"].contains("inference_skipped"));
}

// Every category of distinct stage, the rarer ones only when not zero: the
// line adds up to the distinct count (docs/cli.md, "Text output").
TEST(ReportText, VerdictLineCountsEachDistinctStageOnce) {
  Stats s;
  s.unique_stages = 36;
  s.proven_trivially = 1;
  s.solved = 2;
  s.refuted_by_testing = 3;
  s.symmetric = 4;
  s.untried = 5;
  s.reused = 6;
  s.cached = 7;
  s.shared_proofs = 8;
  EXPECT_EQ(decided_total(s), s.unique_stages);
  EXPECT_EQ(distinct_breakdown(s),
            "36 distinct: 1 trivial, 2 solved, 3 refuted by testing, 4 symmetric, 5 untried, 6 "
            "unchanged, 8 shared proofs, 7 cached");
  count_all_cached(s);
  EXPECT_EQ(distinct_breakdown(s), "36 distinct: 0 trivial, 0 solved, 36 cached");
  EXPECT_EQ(decided_total(s), s.unique_stages);
}

TEST(ReportText, ManyElementsAreCut) {
  Report r = mismatch_report();
  r.findings[0].elements.clear();
  for (int64_t i = 0; i < 20; ++i) r.findings[0].elements.push_back({i});
  std::string text = report_to_text(r);
  EXPECT_NE(text.find("(+12 more)"), std::string::npos) << text;
  EXPECT_EQ(text.find("[19]"), std::string::npos) << text;
}

TEST(ReportText, InvalidShowsTheDiagnostic) {
  Report r;
  r.plan_path = "bad.json";
  r.verdict = Verdict::Invalid;
  Diagnostic d;
  d.rule = "shape";
  d.file = "bad.json";
  d.pointer = "/parallel/ops/3";
  d.line = 12;
  d.column = 7;
  d.message = "matmul: inner dimensions 4 and 8 differ";
  r.invalid = d;
  std::string text = report_to_text(r);
  EXPECT_EQ(text.substr(0, text.find('\n')), "bad.json: INVALID PLAN");
  EXPECT_NE(text.find(d.to_string()), std::string::npos) << text;
  EXPECT_NE(text.find("inner dimensions 4 and 8 differ"), std::string::npos) << text;
}

TEST(ReportText, InternalErrorShowsTheError) {
  Report r;
  r.plan_path = "gone.json";
  r.verdict = Verdict::InternalError;
  r.error = "cannot read gone.json: No such file or directory";
  EXPECT_EQ(report_to_text(r),
            "gone.json: INTERNAL ERROR\n  cannot read gone.json: No such file or directory\n");
}

TEST(ReportText, EngineCounterexampleIsOneLinePerTensorAndElement) {
  Report r = mismatch_report();
  r.findings[0].counterexample = nlohmann::json::parse(R"({
    "inputs": {"out": {"shape": [2, 2], "truncated": false, "values": ["-1", "1/2", "3", "0"]}},
    "parts": {"tp1.partial": {"shape": [2], "truncated": true, "values": ["7", "8"]}},
    "differences": [{"element": [0, 1], "logical": "-1", "parallel": "-1/2"}],
    "reduced": true})");
  std::string text = report_to_text(r);
  EXPECT_NE(text.find("counterexample (reduced sizes):\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n        out [2,2] = -1 1/2 3 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n        tp1.partial [2] = 7 8 ...\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n        [0,1]: logical -1, parallel -1/2\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("reduced = "), std::string::npos) << text;
}

TEST(ReportText, OddCounterexampleShapesDoNotThrow) {
  Report r = mismatch_report();
  for (const char* odd : {R"({"reduced": "yes", "x": {"shape": 1, "values": [], "truncated": 3}})",
                          R"([1, 2])", R"("text")", R"({})"}) {
    r.findings[0].counterexample = nlohmann::json::parse(odd);
    EXPECT_NO_THROW(report_to_text(r)) << odd;
  }
}

TEST(ReportText, InvalidUtf8InACounterexampleIsShownNotThrown) {
  Report r = mismatch_report();
  r.findings[0].counterexample = {{"label", std::string("bad \xff byte")}};
  std::string text;
  EXPECT_NO_THROW(text = report_to_text(r));
  EXPECT_NE(text.find("label = "), std::string::npos) << text;
}

TEST(ReportJson, MismatchHasEveryField) {
  nlohmann::json j = report_to_json(mismatch_report());
  EXPECT_EQ(j["verdict"], "not-equivalent");
  EXPECT_EQ(j["plan"], "tp2-ffn-bug-mean.json");
  EXPECT_EQ(j["name"], "ffn, tp2, partial outputs averaged instead of summed");
  EXPECT_EQ(j["meta"]["tp"], 2);
  ASSERT_EQ(j["findings"].size(), 1u);
  const nlohmann::json& f = j["findings"][0];
  EXPECT_EQ(f["kind"], "mismatch");
  EXPECT_EQ(f["stage"], "stage 3: out[0:8, 0:16]");
  EXPECT_EQ(f["tensor"], "out");
  EXPECT_EQ(f["parallel_tensors"], nlohmann::json({"tp0.out", "tp1.out"}));
  EXPECT_EQ(f["elements"], nlohmann::json::parse("[[0,0],[0,1]]"));
  EXPECT_EQ(f["ops"], nlohmann::json({"ar.out (all_reduce)"}));
  EXPECT_EQ(f["counterexample"]["tp0.part"], nlohmann::json::parse("[[1,0],[0,2]]"));
  EXPECT_EQ(f["message"], "out differs from the mean of its parts");
  const nlohmann::json& s = j["stats"];
  EXPECT_EQ(s["stages"], 3);
  EXPECT_EQ(s["solved"], 1);
  EXPECT_EQ(s["proven_trivially"], 1);
  EXPECT_EQ(s["refuted_by_testing"], 0);
  EXPECT_EQ(s["logical_ops"], 3);
  EXPECT_EQ(s["parallel_ops"], 7);
  EXPECT_DOUBLE_EQ(s["seconds"].get<double>(), 0.414);
  EXPECT_FALSE(j.contains("error"));
}

TEST(ReportJson, EquivalentHasEmptyFindingsAndObjectMeta) {
  Report r;
  r.plan_path = "a.json";
  r.verdict = Verdict::Equivalent;
  r.meta = nullptr;  // a plan without meta still gives an object
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["verdict"], "equivalent");
  EXPECT_TRUE(j["findings"].is_array());
  EXPECT_TRUE(j["findings"].empty());
  EXPECT_TRUE(j["meta"].is_object());
  EXPECT_FALSE(j.contains("error"));
}

// shared_proofs is written and read back (the daemon sends reports as JSON).
TEST(ReportJson, SharedProofsRoundTrip) {
  Report r;
  r.plan_path = "a.json";
  r.verdict = Verdict::Equivalent;
  r.stats.unique_stages = 5;
  r.stats.shared_proofs = 3;
  r.stats.cached = 2;
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["stats"]["shared_proofs"], 3);
  EXPECT_EQ(j["stats"]["cached"], 2);
  std::optional<Report> back = report_from_json(j);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->stats.shared_proofs, 3);
  EXPECT_EQ(back->stats.cached, 2);
}

TEST(ReportJson, InvalidHasTheError) {
  Report r;
  r.plan_path = "bad.json";
  r.verdict = Verdict::Invalid;
  r.invalid = Diagnostic{"ssa", "bad.json", "/logical/ops/1/out/0", 20, 9, "h is produced twice"};
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["verdict"], "invalid");
  EXPECT_EQ(j["error"]["rule"], "ssa");
  EXPECT_EQ(j["error"]["file"], "bad.json");
  EXPECT_EQ(j["error"]["pointer"], "/logical/ops/1/out/0");
  EXPECT_EQ(j["error"]["line"], 20);
  EXPECT_EQ(j["error"]["column"], 9);
  EXPECT_EQ(j["error"]["message"], "h is produced twice");
}

TEST(ReportJson, InternalErrorHasAMessage) {
  Report r;
  r.plan_path = "gone.json";
  r.verdict = Verdict::InternalError;
  r.error = "cannot read gone.json";
  nlohmann::json j = report_to_json(r);
  EXPECT_EQ(j["verdict"], "internal-error");
  EXPECT_EQ(j["error"]["rule"], "internal");
  EXPECT_EQ(j["error"]["message"], "cannot read gone.json");
}

}  // namespace
}  // namespace shardproof
