// Plan generator: writes complete training-step plans (format v1) for a
// model family and a parallel configuration, optionally with one injected
// bug from the family's catalogue.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardproof::planner {

struct PlanConfig {
  int layers = 2;
  int hidden = 8;
  int batch = 8;
  int dp = 1;
  int tp = 1;
  int pp = 1;
  int microbatches = 1;
  std::string optimizer = "sgd";  // "sgd" | "adam"
  std::string bug;                // empty: a correct plan
};

struct BugInfo {
  std::string name;         // what --bug takes
  std::string description;  // one line
  std::string real_world;   // the real-world bug class it stands for
  std::string first_tensor_hint;  // logical tensor (or its prefix) where it first shows
};

std::vector<std::string> list_models();
// Bugs a model can carry; throws std::invalid_argument for an unknown model.
std::vector<BugInfo> list_bugs(const std::string& model);
// A complete plan document. Throws std::invalid_argument with a clear message
// when the configuration does not fit the model (e.g. tp does not divide hidden)
// or the bug does not apply to it (e.g. a dp bug with dp=1).
nlohmann::json generate_plan(const std::string& model, const PlanConfig& config);

}  // namespace shardproof::planner

namespace shardproof::planner {

// The logical tensor a verifier finding must name for `config.bug` in this
// exact configuration (first_tensor_hint is the value for the reference
// configuration; for a few bugs, e.g. pipeline ones, the tensor depends on
// where the stage boundaries fall). Validates like generate_plan; throws
// std::invalid_argument for a config without a bug.
std::string bug_first_tensor(const std::string& model, const PlanConfig& config);

}  // namespace shardproof::planner
