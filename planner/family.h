// A model family: how the planner dispatches by model name. Adding a family
// is one new file that defines a ModelFamily and one line in planner.cpp.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/planner.h"

namespace shardproof::planner {

struct ModelFamily {
  std::string name;
  std::vector<BugInfo> (*bugs)();
  nlohmann::json (*generate)(const PlanConfig& config);
  // The logical tensor the injected bug of `config` first shows at.
  std::string (*bug_first_tensor)(const PlanConfig& config);
};

const ModelFamily& mlp_family();
std::vector<const ModelFamily*> llama3_families();
std::vector<const ModelFamily*> moe_families();

}  // namespace shardproof::planner
