// The mlp family: validates the configuration, then writes the logical and
// the parallel graph of one training step.
#include <stdexcept>

#include "planner/family.h"
#include "planner/mlp.h"
#include "planner/stage_fold.h"

namespace shardproof::planner {

namespace {

std::vector<BugInfo> mlp_bugs() {
  std::vector<BugInfo> infos;
  const mlp::Layout defaults{PlanConfig{}};
  for (const mlp::BugSpec& b : mlp::bug_table())
    infos.push_back(with_needs(b.info, b.not_applicable(defaults)));
  return infos;
}

std::string plan_name(const mlp::Layout& s) {
  auto n = [](auto v) { return std::to_string(v); };
  std::string name = "mlp L" + n(s.L) + " h" + n(s.H) + " b" + n(s.B) + " dp" + n(s.dp) + " tp" +
                     n(s.tp) + " pp" + n(s.pp) + " mb" + n(s.mb) + " " + s.c.optimizer;
  if (!s.c.bug.empty()) name += ", bug " + s.c.bug;
  return name;
}

nlohmann::json mlp_generate(const PlanConfig& config) {
  mlp::Layout layout(config);
  const mlp::BugSpec* bug = mlp::find_bug(layout);
  GraphBuilder logical;
  mlp::build_logical(layout, logical);
  nlohmann::json parallel_json;
  if (config.compact) {
    parallel_json = mlp::build_compact_parallel(layout);
    if (config.fold_stages) parallel_json = fold_pipeline_stages(std::move(parallel_json));
  } else {
    GraphBuilder parallel(&logical, layout.world());
    mlp::build_parallel(layout, parallel);
    parallel_json = parallel.to_json();
  }
  nlohmann::json meta = {
      {"model", "mlp"},    {"layers", layout.L},        {"hidden", layout.H},
      {"batch", layout.B}, {"dp", layout.dp},           {"tp", layout.tp},
      {"pp", layout.pp},   {"microbatches", layout.mb}, {"optimizer", layout.c.optimizer}};
  if (bug) {
    meta["bug"] = bug->info.name;
    meta["bug_first_tensor"] = bug->first_tensor(layout);
  }
  return {{"format", config.compact ? "shardproof-plan/1.1" : "shardproof-plan/1"},
          {"name", plan_name(layout)},
          {"meta", std::move(meta)},
          {"logical", logical.to_json()},
          {"parallel", std::move(parallel_json)}};
}

std::string mlp_bug_first_tensor(const PlanConfig& config) {
  mlp::Layout layout(config);
  const mlp::BugSpec* bug = mlp::find_bug(layout);
  if (!bug) throw std::invalid_argument("mlp: no bug in this config");
  return bug->first_tensor(layout);
}

}  // namespace

const ModelFamily& mlp_family() {
  static const ModelFamily family{"mlp", &mlp_bugs, &mlp_generate, &mlp_bug_first_tensor};
  return family;
}

}  // namespace shardproof::planner
