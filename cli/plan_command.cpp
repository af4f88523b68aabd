// `shardproof plan MODEL ...`: writes a generated training-step plan (format
// v1) for a model family and parallel configuration, optionally with one
// injected bug; also lists the model families and each one's bugs.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "planner/planner.h"

namespace shardproof::cli {

namespace {

int list_bugs(const std::string& model) {
  std::vector<planner::BugInfo> bugs = planner::list_bugs(model);
  size_t width = 0;
  for (const auto& b : bugs) width = std::max(width, b.name.size());
  // Name first and alone in its column, so `cut -d' ' -f1` gives the names.
  for (const auto& b : bugs) {
    std::cout << b.name << std::string(width - b.name.size() + 2, ' ') << b.description;
    if (!b.real_world.empty()) std::cout << " (real world: " << b.real_world << ")";
    std::cout << " [needs: " << (b.needs.empty() ? "nothing beyond the defaults" : b.needs) << "]";
    std::cout << "\n";
  }
  return kExitOk;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, PlanArgs& args) {
  CLI::App* cmd =
      app.add_subcommand("plan", "Generate a plan for a model family and a parallel configuration");
  planner::PlanConfig& c = args.config;
  cmd->add_option("model", args.model, "Model family (see --list-models)");
  // Sizes default to the model's own (its published shape for llama3-*).
  cmd->add_option("--layers", c.layers, "Layers (default: the model's)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--hidden", c.hidden, "Hidden size (mlp; default 8)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option(
         "--batch", c.batch,
         "Global batch: rows (mlp) or sequences (default: the model's, or dp*microbatches)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seq", c.seq, "Sequence length (transformers; default: the model's)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--dp", c.dp, "Data-parallel degree")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--tp", c.tp, "Tensor-parallel degree")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--pp", c.pp, "Pipeline-parallel degree")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--vpp", c.vpp,
                  "Interleaved pipeline: model chunks (virtual stages) per pp rank (transformers)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--cp", c.cp, "Context-parallel degree (transformers)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--sp", c.sp, "Sequence parallelism over the tp group (transformers)");
  cmd->add_option("--zero", c.zero,
                  "ZeRO stage: 0 gradient all-reduce, 1 or 2 optimizer state sharded over dp, 3 "
                  "parameters too (transformers)")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  cmd->add_option("--ep", c.ep, "Expert-parallel degree (MoE models): divides dp")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--etp", c.etp,
                  "Expert tensor-parallel degree (MoE models): divides tp; default tp")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_flag("--tie-embeddings", c.tie_embeddings,
                "LM head shares the embedding table (transformers)");
  cmd->add_flag("--bias", c.bias,
                "Attention output projection with a bias, added on tp rank 0 before the "
                "all-reduce (transformers)");
  cmd->add_flag("--reshard-residual", c.reshard_residual,
                "Each layer's output is cut to the tp rank's hidden block and all-gathered back "
                "(transformers)");
  cmd->add_flag("--clip", c.clip, "Clip gradients by their global norm (transformers)");
  cmd->add_flag("--dropout", c.dropout, "Dropout on each dense MLP output (transformers)");
  cmd->add_flag("--schedule", c.schedule,
                "Write the 1F1B (interleaved with --vpp) pipeline schedule section (pp >= 2)");
  cmd->add_option("--microbatches", c.microbatches, "Micro-batches per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option(
         "--optimizer", c.optimizer,
         "Optimizer step: sgd or adam (AdamW); default: the model's (mlp sgd, llama3 adam)")
      ->check(CLI::IsMember({"sgd", "adam"}));
  cmd->add_option("--bug", c.bug, "Inject one bug from the model's catalogue (see --list-bugs)");
  cmd->add_flag("--compact", c.compact,
                "Write the compact form (shardproof-plan/1.1): programs over the device mesh, "
                "a file that does not grow with dp, tp, cp or micro-batches");
  cmd->add_flag("!--no-fold-stages", c.fold_stages,
                "With --compact: one program per pipeline stage, instead of one program for each "
                "run of identical stages (their numbers affine in pp)");
  cmd->add_option("-o,--output", args.output, "Write the plan here instead of stdout");
  cmd->add_flag("--list-bugs", args.list_bugs, "List the bugs MODEL can carry");
  cmd->add_flag("--list-models", args.list_models, "List the model families");
  return cmd;
}

int run_plan(const PlanArgs& args) {
  try {
    if (args.list_models) {
      for (const std::string& m : planner::list_models()) std::cout << m << "\n";
      return kExitOk;
    }
    if (args.model.empty()) {
      std::cerr << "shardproof plan: MODEL is required (see `shardproof plan --list-models`)\n";
      return kExitUsage;
    }
    if (args.list_bugs) return list_bugs(args.model);

    nlohmann::json plan = planner::generate_plan(args.model, args.config);
    // Indent 1: readable in a diff, a third the size of indent 4.
    std::string text = plan.dump(1) + "\n";
    if (args.output.empty() || args.output == "-") {
      std::cout << text << std::flush;
      return std::cout ? kExitOk : kExitInternal;
    }
    std::ofstream out(args.output, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::cerr << "shardproof plan: cannot write " << args.output << "\n";
      return kExitInternal;
    }
    return kExitOk;
  } catch (const std::invalid_argument& e) {
    // The planner's words: which model, which option, why it does not fit.
    std::cerr << "shardproof plan: " << e.what() << "\n";
    return kExitUsage;
  }
}

}  // namespace shardproof::cli
