// The mlp bug catalogue: what each injected bug stands for, when it applies,
// and the logical tensor whose claim it breaks first. The injection itself
// sits where the parallel builder emits the op it corrupts (grep the name).
#include <stdexcept>

#include "planner/mlp.h"

namespace shardproof::planner::mlp {

namespace {

std::string needs(bool ok, const std::string& why) {
  return ok ? "" : "needs " + why;
}

const std::vector<BugSpec>& table() {
  static const std::vector<BugSpec> bugs = {
      {{"drop-tp-allreduce",
        "layer 1 (row-parallel) partial outputs are not summed: its forward all_reduce runs on "
        "one-rank groups (dp0, mb0), so each tp rank goes on with its own partial",
        "missing all-reduce after a row-parallel linear (wrong process group)", "l1.pre"},
       [](const Layout& s) { return needs(s.tp >= 2 && s.L >= 2, "tp >= 2 and layers >= 2"); },
       [](const Layout&) { return std::string("l1.pre"); }},
      {{"allreduce-mean-not-sum",
        "layer 1 (row-parallel) forward all_reduce averages the partial outputs instead of "
        "summing them (dp0, mb0)",
        "all-reduce with op=AVG where SUM is required", "l1.pre"},
       [](const Layout& s) { return needs(s.tp >= 2 && s.L >= 2, "tp >= 2 and layers >= 2"); },
       [](const Layout&) { return std::string("l1.pre"); }},
      {{"swapped-shards",
        "tp ranks 0 and 1 (dp0) hold each other's layer-0 weight shard, but compute as if it "
        "were their own",
        "sharded checkpoint loaded in the wrong tp rank order", "l0.pre"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout&) { return std::string("l0.pre"); }},
      {{"tp-input-grad-not-reduced",
        "layer 2 (column-parallel) input gradient is not all-reduced over tp in the backward "
        "(dp0, mb0): each rank keeps its partial",
        "missing all-reduce in the backward of a column-parallel linear (Megatron's f/g "
        "operators swapped)",
        "grad.l1.act"},
       [](const Layout& s) { return needs(s.tp >= 2 && s.L >= 3, "tp >= 2 and layers >= 3"); },
       [](const Layout&) { return std::string("grad.l1.act"); }},
      {{"dp-grad-not-synced",
        "layer 0's weight gradient is never all-reduced over dp: each dp rank steps with its own "
        "gradient",
        "parameter missed by the DDP gradient hook (e.g. registered after wrapping)", "w0.next"},
       [](const Layout& s) { return needs(s.dp >= 2, "dp >= 2"); },
       [](const Layout&) { return std::string("w0.next"); }},
      {{"dp-grad-mean-not-sum",
        "layer 0's weight gradient is averaged over dp (tp0) although each part is already scaled "
        "by 1/(global element count)",
        "gradient divided by the world size twice (loss already normalised globally)", "grad.w0"},
       [](const Layout& s) { return needs(s.dp >= 2, "dp >= 2"); },
       [](const Layout&) { return std::string("grad.w0"); }},
      {{"dp-grad-double-allreduce",
        "layer 0's weight gradient is all-reduced over dp twice (tp0): dp times too large",
        "gradient synchronised by both DDP and a manual all-reduce", "grad.w0"},
       [](const Layout& s) { return needs(s.dp >= 2, "dp >= 2"); },
       [](const Layout&) { return std::string("grad.w0"); }},
      {{"pp-send-wrong-tensor",
        "the pipeline send of the middle boundary activation (dp0, tp0, mb0) carries the "
        "pre-activation (before gelu) instead of the activation",
        "pipeline stage sends the wrong buffer", "l1.act"},
       [](const Layout& s) { return needs(s.pp >= 2, "pp >= 2"); },
       [](const Layout& s) { return act(s.bug_boundary_layer()); }},
      {{"pp-send-wrong-microbatch",
        "the pipeline send of the middle boundary activation for micro-batch 0 (dp0, tp0) carries "
        "micro-batch 1's activation",
        "pipeline schedule indexes the wrong micro-batch buffer", "l1.act"},
       [](const Layout& s) {
         return needs(s.pp >= 2 && s.mb >= 2, "pp >= 2 and microbatches >= 2");
       },
       [](const Layout& s) { return act(s.bug_boundary_layer()); }},
      {{"loss-scale-wrong-microbatch-count",
        "each micro-batch's loss and loss gradient are divided by the micro-batch's own element "
        "count instead of the global one, so the accumulated loss is dp*microbatches too large",
        "gradient accumulation without dividing by the number of micro-batches", "loss"},
       [](const Layout& s) { return needs(s.mb >= 2, "microbatches >= 2"); },
       [](const Layout&) { return std::string("loss"); }},
  };
  return bugs;
}

}  // namespace

const std::vector<BugSpec>& bug_table() {
  return table();
}

const BugSpec* find_bug(const Layout& s) {
  if (s.c.bug.empty()) return nullptr;
  std::string known;
  for (const BugSpec& b : table()) {
    if (b.info.name == s.c.bug) {
      std::string why = b.not_applicable(s);
      if (!why.empty())
        throw std::invalid_argument("mlp: bug '" + s.c.bug + "' does not apply to this config (" +
                                    why + ")");
      return &b;
    }
    known += (known.empty() ? "" : ", ") + b.info.name;
  }
  throw std::invalid_argument("mlp: unknown bug '" + s.c.bug + "' (known bugs: " + known + ")");
}

}  // namespace shardproof::planner::mlp
