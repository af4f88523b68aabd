// Dispatch by model name over the registered families.
#include "planner/planner.h"

#include <stdexcept>

#include "planner/family.h"

namespace shardproof::planner {

namespace {

const std::vector<const ModelFamily*>& families() {
  static const std::vector<const ModelFamily*> all = [] {
    std::vector<const ModelFamily*> f = {&mlp_family()};
    for (const ModelFamily* m : llama3_families()) f.push_back(m);
    for (const ModelFamily* m : moe_families()) f.push_back(m);
    return f;
  }();
  return all;
}

const ModelFamily& find_family(const std::string& model) {
  std::string known;
  for (const ModelFamily* f : families()) {
    if (f->name == model) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw std::invalid_argument("unknown model '" + model + "' (known models: " + known + ")");
}

}  // namespace

std::vector<std::string> list_models() {
  std::vector<std::string> names;
  for (const ModelFamily* f : families()) names.push_back(f->name);
  return names;
}

BugInfo with_needs(BugInfo info, const std::string& why_not_at_defaults) {
  const std::string prefix = "needs ";
  info.needs = why_not_at_defaults.rfind(prefix, 0) == 0 ? why_not_at_defaults.substr(prefix.size())
                                                         : why_not_at_defaults;
  return info;
}

std::vector<BugInfo> list_bugs(const std::string& model) {
  return find_family(model).bugs();
}

nlohmann::json generate_plan(const std::string& model, const PlanConfig& config) {
  const ModelFamily& family = find_family(model);
  return family.generate(config);
}

std::string bug_first_tensor(const std::string& model, const PlanConfig& config) {
  return find_family(model).bug_first_tensor(config);
}

}  // namespace shardproof::planner
