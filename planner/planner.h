// Plan generator: writes complete training-step plans (format v1) for a
// model family and a parallel configuration, optionally with one injected
// bug from the family's catalogue.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardproof::planner {

// Sizes left at 0 take the model's default (its published shape for the
// llama3 presets). Degrees a family does not support must stay at 1.
struct PlanConfig {
  int layers = 0;
  int hidden = 0;
  int batch = 0;    // global batch (rows for mlp, sequences for transformers)
  int64_t seq = 0;  // sequence length (transformers)
  int dp = 1;
  int tp = 1;
  int pp = 1;
  // transformers: interleaved pipeline (Megatron's virtual stages): each pp
  // rank holds vpp non-contiguous chunks of layers.
  int vpp = 1;
  int cp = 1;       // context parallel (transformers)
  bool sp = false;  // sequence parallel over the tp group (transformers)
  int zero = 0;     // 0: gradient all-reduce; 1|2: ZeRO optimizer-state sharding over dp
  int ep = 1;       // expert parallel (MoE families)
  // MoE families: expert tensor parallel degree (Megatron's
  // --expert-tensor-parallel-size), a divisor of tp; 0: tp (the default).
  int etp = 0;
  bool tie_embeddings = false;  // transformers: LM head shares the embedding table
  // transformers: the attention output projection has a bias, added on tp
  // rank 0 only before the all-reduce (correct; every rank adding it is a bug).
  bool bias = false;
  // transformers: each layer's output, replicated over tp, is cut to the tp
  // rank's hidden block and all-gathered back (a correct round trip).
  bool reshard_residual = false;
  int microbatches = 1;
  // transformers: clip the gradients by their global norm before the
  // optimizer step (max norm 1), the norm summed over every parallel kind.
  bool clip = false;
  // transformers (dense layers): dropout on each MLP output, the mask drawn
  // by the `random` op from the generator state `rng.state`.
  bool dropout = false;
  // transformers, pp >= 2 (v1 form): write the "schedule" section, the 1F1B
  // order of each rank's pipeline sends and receives, which verify checks.
  bool schedule = false;
  std::string optimizer;  // "sgd" | "adam"; empty: the model's default
  std::string bug;        // empty: a correct plan
  // Write the compact form (shardproof-plan/1.1): programs over the device
  // mesh, a file whose size does not grow with dp, tp or micro-batches.
  bool compact = false;
  // The compact form: write a run of identical pipeline stages (the same
  // layers under other numbers) as one program affine in pp
  // (planner/stage_fold.h). Off: one program per stage.
  bool fold_stages = true;
};

struct BugInfo {
  std::string name;                    // what --bug takes
  std::string description;             // one line
  std::string real_world;              // the real-world bug class it stands for
  std::string first_tensor_hint = "";  // logical tensor (or its prefix) where it first shows
  // The configuration it needs beyond the family's defaults, e.g. "tp >= 2"
  // (empty: the default configuration already carries it). list_bugs fills
  // it from the same rule that refuses the bug elsewhere.
  std::string needs = "";
};

// `info` with `needs` set from why the bug is refused on the family's default
// configuration ("needs tp >= 2" -> "tp >= 2"; "" when it applies there).
BugInfo with_needs(BugInfo info, const std::string& why_not_at_defaults);

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
