// Shared by the planner suites: a compact way to name an MLP configuration.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "planner/planner.h"

namespace shardproof::testing {

inline planner::PlanConfig mlp_config(int layers, int dp, int tp, int pp, int mb,
                                      const std::string& optimizer = "sgd",
                                      const std::string& bug = "") {
  planner::PlanConfig c;
  c.layers = layers;
  c.hidden = 8;
  c.batch = 8;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  c.microbatches = mb;
  c.optimizer = optimizer;
  c.bug = bug;
  return c;
}

// The test matrix: every dp, tp, pp in {1, 2, 4} and 1 or 2 micro-batches
// on 4 layers, alternating sgd and adam.
inline std::vector<planner::PlanConfig> mlp_config_matrix() {
  std::vector<planner::PlanConfig> configs;
  for (int dp : {1, 2, 4})
    for (int tp : {1, 2, 4})
      for (int pp : {1, 2, 4})
        for (int mb : {1, 2})
          configs.push_back(
              mlp_config(4, dp, tp, pp, mb, (dp + tp + pp + mb) % 2 ? "adam" : "sgd"));
  return configs;
}

// A transformer family's configuration (its shapes are the family's own).
inline planner::PlanConfig transformer_config(int layers, int dp, int tp, int pp, int mb) {
  planner::PlanConfig c;
  c.layers = layers;
  c.dp = dp;
  c.tp = tp;
  c.pp = pp;
  c.microbatches = mb;
  return c;
}

// The first configuration (from a list covering every parallelism kind,
// small first: two layers unless the bug needs a stage with two layers)
// that llama3-tiny's `bug` applies to, with the bug set.
inline std::optional<planner::PlanConfig> llama_config_for_bug(const std::string& bug) {
  auto with = [](planner::PlanConfig c, auto edit) {
    edit(c);
    return c;
  };
  const std::vector<planner::PlanConfig> candidates = {
      transformer_config(2, 2, 2, 1, 1),
      with(transformer_config(2, 2, 2, 1, 1), [](auto& c) { c.sp = true; }),
      with(transformer_config(2, 2, 1, 1, 1), [](auto& c) { c.cp = 2; }),
      with(transformer_config(2, 2, 1, 1, 1), [](auto& c) { c.zero = 1; }),
      transformer_config(2, 1, 1, 2, 2),
      with(transformer_config(2, 1, 1, 2, 1), [](auto& c) { c.tie_embeddings = true; }),
      transformer_config(2, 1, 4, 1, 1),
      transformer_config(4, 1, 1, 2, 1),
      with(transformer_config(2, 1, 2, 1, 1), [](auto& c) { c.bias = true; }),
      with(transformer_config(2, 1, 2, 1, 1), [](auto& c) { c.reshard_residual = true; }),
      // The training-step catalogue (step_bugs.cpp): clipping, accumulation,
      // ZeRO with a tied table on two stages.
      with(transformer_config(2, 2, 2, 1, 1), [](auto& c) { c.clip = true; }),
      with(transformer_config(2, 1, 1, 2, 1), [](auto& c) { c.clip = true; }),
      transformer_config(2, 2, 1, 1, 2),
      with(transformer_config(2, 2, 1, 2, 1), [](auto& c) { c.tie_embeddings = true, c.zero = 1; }),
      with(transformer_config(2, 1, 2, 1, 1), [](auto& c) { c.dropout = true; }),
      with(transformer_config(2, 1, 2, 1, 1), [](auto& c) { c.dropout = true, c.sp = true; }),
      with(transformer_config(2, 1, 1, 2, 2), [](auto& c) { c.schedule = true; }),
      with(transformer_config(2, 2, 1, 1, 1), [](auto& c) { c.zero = 3; }),
      // The interleaved pipeline: two chunks of one layer per rank.
      with(transformer_config(4, 1, 1, 2, 2), [](auto& c) { c.vpp = 2; }),
      with(transformer_config(4, 1, 1, 2, 2), [](auto& c) { c.vpp = 2, c.schedule = true; }),
  };
  for (planner::PlanConfig c : candidates) {
    c.bug = bug;
    try {
      planner::bug_first_tensor("llama3-tiny", c);
      return c;
    } catch (const std::invalid_argument&) {
    }
  }
  return std::nullopt;
}

// "L4 dp2 tp2 pp1 mb2 sgd [bug]" for failure messages.
inline std::string describe(const planner::PlanConfig& c) {
  return "L" + std::to_string(c.layers) + " dp" + std::to_string(c.dp) + " tp" +
         std::to_string(c.tp) + " pp" + std::to_string(c.pp) + " mb" +
         std::to_string(c.microbatches) + " " + c.optimizer + (c.bug.empty() ? "" : " " + c.bug);
}

}  // namespace shardproof::testing
