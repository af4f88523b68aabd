// Helpers shared by the test suites: write a plan document to a temporary
// file and verify it through the engine's public entry point.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "engine/verifier.h"

namespace shardproof::testing {

inline std::string write_temp_plan(const nlohmann::json& plan, const std::string& stem) {
  auto dir = std::filesystem::temp_directory_path() / "shardproof-tests";
  std::filesystem::create_directories(dir);
  auto path = dir / (stem + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << plan.dump(1);
  return path.string();
}

inline Report verify_json(const nlohmann::json& plan, const std::string& stem = "plan") {
  VerifyOptions options;
  options.jobs = 2;
  return verify_plan_file(write_temp_plan(plan, stem), options);
}

// A plan document parsed as a file (a failure to parse fails the test).
inline Plan parse_doc(const nlohmann::json& doc, const std::string& stem) {
  ParseResult parsed = parse_plan_file(write_temp_plan(doc, stem));
  if (!parsed.plan) ADD_FAILURE() << (parsed.error ? parsed.error->to_string() : parsed.io_error);
  return parsed.plan ? *parsed.plan : Plan{};
}

// Two solver threads and the given claim inference.
inline VerifyOptions inference_options(ClaimInference mode) {
  VerifyOptions o;
  o.jobs = 2;
  o.infer_claims = mode;
  return o;
}

// Readable failure output: the whole report as text.
inline std::string explain(const Report& r) {
  return report_to_text(r);
}

// A generated plan's bug is found first where the planner says it shows:
// not equivalent, and the first finding a mismatch at meta.bug_first_tensor.
inline void expect_bug_found_first(const nlohmann::json& plan, const std::string& stem) {
  const std::string expected = plan["meta"].value("bug_first_tensor", "");
  ASSERT_FALSE(expected.empty()) << stem;
  const Report r = verify_json(plan, stem);
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << stem << "\n" << explain(r);
  ASSERT_FALSE(r.findings.empty()) << stem;
  EXPECT_EQ(r.findings[0].kind, "mismatch") << stem << "\n" << explain(r);
  EXPECT_EQ(r.findings[0].tensor, expected) << stem << "\n" << explain(r);
}

}  // namespace shardproof::testing
