// Helpers shared by the test suites: write a plan document to a temporary
// file and verify it through the engine's public entry point.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

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

// Readable failure output: the whole report as text.
inline std::string explain(const Report& r) {
  return report_to_text(r);
}

}  // namespace shardproof::testing
