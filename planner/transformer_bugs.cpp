// The transformer bug catalogue: what each injected bug stands for, when it
// applies, the logical tensor whose claim it breaks first, and the hooks the
// builder asks at the one site each bug corrupts (dp rank 0, cp rank 0,
// micro-batch 0, the reference layer).
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string needs(bool ok, const std::string& why) {
  return ok ? "" : "needs " + why;
}

std::string in_ref(const Layout& s, const std::string& what) {
  return layer(s.bug_layer()) + "." + what;
}

// The first layer of the pipeline stage after the middle: where the pp-send
// bugs corrupt the activation sent.
std::string boundary_resid(const Layout& s) {
  return resid(s.stage_begin(s.pp / 2 > 0 ? s.pp / 2 : 1));
}

// The first layer of virtual stage pp (rank 0's second chunk): its input
// comes back from the last pp rank (vpp-send-wrong-chunk).
std::string wrap_resid(const Layout& s) {
  return resid(s.stage_begin(s.pp));
}

const std::vector<BugSpec>& table() {
  static const std::vector<BugSpec> bugs = {
      {{"row-parallel-no-allreduce",
        "the attention output projection's partial sums (row-parallel) are not all-reduced over tp "
        "in the reference layer: each rank goes on with its own part",
        "missing all-reduce after a row-parallel linear"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout& s) { return in_ref(s, "attn"); }},
      {{"allreduce-mean-not-sum",
        "the MLP down projection's partial sums are averaged over tp instead of summed",
        "all-reduce with op=AVG where SUM is required"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout& s) { return in_ref(s, "mlp"); }},
      {{"double-allreduce",
        "the attention output projection is all-reduced twice over tp: tp times too large",
        "double reduction (an all-reduce both inside and after a parallel linear)"},
       [](const Layout& s) { return needs(s.tp >= 2 && !s.sp, "tp >= 2 without sp"); },
       [](const Layout& s) { return in_ref(s, "attn"); }},
      {{"tp-input-grad-not-reduced",
        "the gradient of the attention input (column-parallel q/k/v backward) is not all-reduced "
        "over tp",
        "missing all-reduce in the backward of a column-parallel linear (f/g operators swapped)"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout& s) { return grad(in_ref(s, "an.out")); }},
      {{"sp-norm-grad-not-reduced",
        "under sequence parallelism the attention norm weight's gradient is not summed over the tp "
        "group: each rank steps with its own tokens' share",
        "norm weight gradient not all-reduced under sequence parallelism (Megatron "
        "sequence_parallel grads)"},
       [](const Layout& s) { return needs(s.sp, "sp"); },
       [](const Layout& s) { return grad(in_ref(s, "an.w")); }},
      {{"sp-allgather-order",
        "the sequence-parallel all-gather before attention concatenates the ranks' sequence "
        "pieces in reverse order",
        "all-gather with the wrong rank order"},
       [](const Layout& s) { return needs(s.sp, "sp"); },
       [](const Layout& s) { return in_ref(s, "an.out"); }},
      {{"sp-allgather-dim",
        "the sequence-parallel all-gather before attention gathers along the hidden dimension "
        "into a flat buffer that is then viewed as [batch, seq, hidden]",
        "collective along the wrong dimension"},
       [](const Layout& s) { return needs(s.sp, "sp"); },
       [](const Layout& s) { return in_ref(s, "an.out"); }},
      {{"fused-gate-up-contiguous",
        "the fused [gate | up] weight is cut into contiguous tp blocks, as if it were interleaved "
        "per rank: rank 0 gets only gate columns and uses half of them as up",
        "fused weight split with the wrong layout (gate/up or QKV)"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       // Every tp rank's gate or up is wrong (rank 0's up, the last rank's
       // gate, middle ranks' both), all at the same depth; the first in the
       // parallel topological order, the report's first finding, is rank
       // 0's up: its gate columns are its own gate block, so its gate holds.
       [](const Layout& s) { return in_ref(s, "up"); }},
      {{"kv-heads-not-replicated",
        "with tp above the kv-head count, tp rank t loads kv head t % kv_heads instead of the "
        "head its query group uses",
        "GQA with tp > num_kv_heads and no kv replication"},
       [](const Layout& s) { return needs(s.tp > s.NKV, "tp > kv heads"); },
       [](const Layout& s) { return in_ref(s, "k"); }},
      {{"cp-kv-allgather-order",
        "the context-parallel all-gather of K concatenates the cp ranks' chunks in reverse order",
        "context-parallel K/V gathered in the wrong order"},
       [](const Layout& s) { return needs(s.cp >= 2, "cp >= 2"); },
       [](const Layout& s) { return in_ref(s, "k.rope"); }},
      {{"cp-kv-grad-not-reduced",
        "the gradient of K is not reduce-scattered over the cp group: each cp rank keeps its own "
        "queries' share for its chunk",
        "missing context-parallel reduction of K/V gradients"},
       [](const Layout& s) { return needs(s.cp >= 2, "cp >= 2"); },
       [](const Layout& s) { return grad(in_ref(s, "k.rope")); }},
      {{"cp-loss-scale-local",
        "the loss and its gradient are divided by the tokens of the cp rank's own chunk",
        "context-parallel loss scaled by the local instead of the global token count"},
       [](const Layout& s) { return needs(s.cp >= 2, "cp >= 2"); },
       [](const Layout&) { return std::string("loss"); }},
      {{"microbatch-loss-scale",
        "each micro-batch's loss and loss gradient are divided by the micro-batch's own token "
        "count, so the accumulated gradient is dp*microbatches too large",
        "gradient accumulation averaging means of micro-batches"},
       [](const Layout& s) { return needs(s.dp * s.mb >= 2, "dp * microbatches >= 2"); },
       [](const Layout&) { return std::string("loss"); }},
      {{"dp-grad-not-synced",
        "the reference layer's wq gradient is never all-reduced over dp (tp rank 0)",
        "parameter missed by the DDP gradient hook"},
       [](const Layout& s) { return needs(s.dp * s.cp >= 2, "dp * cp >= 2"); },
       [](const Layout& s) { return grad(in_ref(s, "wq")); }},
      {{"dp-grad-mean-not-sum",
        "the reference layer's wq gradient is averaged over dp although the loss is already "
        "normalised by the global token count",
        "data-parallel average where a sum is due (gradient divided twice)"},
       [](const Layout& s) { return needs(s.dp * s.cp >= 2, "dp * cp >= 2"); },
       [](const Layout& s) { return grad(in_ref(s, "wq")); }},
      {{"zero-allgather-order",
        "ZeRO: the updated shards of the reference layer's wq are all-gathered in reverse order "
        "(tp rank 0)",
        "ZeRO parameter shards gathered in the wrong order"},
       // ZeRO-3 keeps the updated shards: no gather after the step.
       [](const Layout& s) { return needs(s.zero == 1 || s.zero == 2, "zero 1 or 2"); },
       [](const Layout& s) { return in_ref(s, "wq.next"); }},
      {{"vocab-range-off-by-one",
        "vocabulary-parallel embedding: tp rank 0 owns one id less than its block (hi - 1)",
        "vocabulary-parallel embedding with a wrong vocabulary range"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout&) { return resid(0); }},
      {{"ce-max-not-reduced",
        "vocabulary-parallel cross-entropy uses each rank's local max instead of the all-reduced "
        "max",
        "missing all-reduce in vocabulary-parallel cross-entropy"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout&) { return std::string("ce.max"); }},
      {{"ce-sumexp-not-reduced",
        "vocabulary-parallel cross-entropy normalises by each rank's own sum of exponentials: a "
        "softmax over the local vocabulary shard",
        "loss computed on local logits (softmax normalised per vocabulary shard, logits not "
        "gathered)"},
       [](const Layout& s) { return needs(s.tp >= 2, "tp >= 2"); },
       [](const Layout&) { return std::string("ce.sumexp"); }},
      {{"tied-embedding-not-synced",
        "tied embedding: the first stage's and the last stage's table gradients are not summed, "
        "so the two copies step apart",
        "tied embedding/LM-head weights not kept in sync across pipeline stages"},
       [](const Layout& s) { return needs(s.tie && s.pp >= 2, "tie_embeddings and pp >= 2"); },
       [](const Layout&) { return grad("emb"); }},
      {{"pp-send-wrong-tensor",
        "the pipeline send of a stage boundary activation carries the attention residual (before "
        "the MLP) instead of the layer output",
        "pipeline stage sends the wrong buffer"},
       [](const Layout& s) { return needs(s.pp >= 2, "pp >= 2"); },
       [](const Layout& s) { return boundary_resid(s); }},
      {{"pp-send-wrong-microbatch",
        "the pipeline send of a stage boundary activation for micro-batch 1 carries micro-batch "
        "0's activation",
        "pipeline schedule indexes the wrong micro-batch buffer"},
       [](const Layout& s) {
         return needs(s.pp >= 2 && s.mb >= 2, "pp >= 2 and microbatches >= 2");
       },
       [](const Layout& s) { return boundary_resid(s); }},
      {{"vpp-send-wrong-chunk",
        "interleaved pipeline: the wrap-around send from the last pp rank to rank 0 (virtual "
        "stage pp - 1 to pp) carries the input of the last rank's chunk instead of its output "
        "(dp 0, tp 0, micro-batch 0)",
        "interleaved pipeline sends another model chunk's (virtual stage's) activation"},
       [](const Layout& s) { return needs(s.vpp >= 2, "vpp >= 2"); },
       [](const Layout& s) { return wrap_resid(s); }},
      {{"pp-stage-layers-swapped",
        "the last pipeline stage loads the weights of its first two layers in swapped order",
        "pipeline stage built with the wrong layer order"},
       [](const Layout& s) {
         return needs(s.stage_end(s.last_stage()) - s.stage_begin(s.last_stage()) >= 2,
                      "two layers on the last pipeline stage");
       },
       [](const Layout& s) { return layer(s.stage_begin(s.last_stage())) + ".an.out"; }},
  };
  return bugs;
}

}  // namespace

const std::vector<BugSpec>& bug_table() {
  return table();
}

const BugSpec* find_bug(const Layout& s, const std::string& family) {
  if (s.c.bug.empty()) return nullptr;
  std::string known;
  for (const BugSpec* b : all_bugs()) {
    if (b->info.name == s.c.bug) {
      std::string why = b->not_applicable(s);
      if (why.empty()) why = family_not_applicable(s, s.c.bug);
      if (!why.empty())
        throw std::invalid_argument(family + ": bug '" + s.c.bug +
                                    "' does not apply to this config (" + why + ")");
      return b;
    }
    known += (known.empty() ? "" : ", ") + b->info.name;
  }
  throw std::invalid_argument(family + ": unknown bug '" + s.c.bug + "' (known bugs: " + known +
                              ")");
}

// --- the builder's hooks

bool Builder::fires(const char* bug, int i, const Coord& x) const {
  return s.bug(bug) && (i < 0 || i == s.bug_layer()) && x.d == 0 && x.c == 0 && x.m == 0;
}

Builder::BugSite Builder::site_at(const Coord& x, int m, bool t0) const {
  BugSite site{true};
  // A symbolic coordinate is one axis, or (the expert mesh's dp rank, want
  // 0) a sum of axes with positive coefficients: 0 where each axis is.
  auto need = [&](const Ix& v, int want) {
    if (!v.symbolic()) {
      site.fires = site.fires && int(v) == want;
      return;
    }
    const Aff& a = v.aff();
    const bool one_axis = a.terms().size() == 1 && a.terms().begin()->second == 1;
    if (a.offset() != 0 || (want != 0 && !one_axis))
      throw std::logic_error("transformer planner: bug site off an axis");
    for (const auto& [axis, k] : a.terms()) {
      if (k <= 0) throw std::logic_error("transformer planner: bug site off an axis");
      if (axis_size(axis) > 1) site.at.ranges.push_back({axis, want, want, axis_size(axis)});
    }
  };
  need(x.d, 0);
  need(x.c, 0);
  if (t0) need(x.t, 0);
  need(x.m, m);
  if (!site.fires) site.at.ranges.clear();
  return site;
}

void Builder::branch(const BugSite& site, const std::function<void(bool)>& emit) {
  if (!site.fires || site.at.ranges.empty()) return emit(site.fires);
  {
    Graph::When there(g, site.at.inside());
    emit(true);
  }
  for (const std::string& rest : site.at.outside()) {
    Graph::When elsewhere(g, rest);
    emit(false);
  }
}

std::pair<std::string, Builder::BugSite> Builder::tp_sum_bug(const std::string& site,
                                                             const Coord& x) const {
  const std::string ref = layer(s.bug_layer());
  const struct {
    const char* bug;
    std::string site;
    const char* kind;
  } hooks[] = {{"row-parallel-no-allreduce", ref + ".attn", "skip"},
               {"double-allreduce", ref + ".attn", "double"},
               {"allreduce-mean-not-sum", ref + ".mlp", "mean"},
               {"tp-input-grad-not-reduced", grad(ref + ".an.out"), "skip"}};
  for (const auto& h : hooks)
    if (s.bug(h.bug) && site == h.site) return {h.kind, site_at(x)};
  return moe_tp_sum_bug(site, x);
}

std::pair<std::string, Builder::BugSite> Builder::gather_bug(const std::string& name,
                                                             const Coord& x) const {
  if (name != layer(s.bug_layer()) + ".an.out") return {"", {}};
  if (s.bug("sp-allgather-order")) return {"order", site_at(x)};
  if (s.bug("sp-allgather-dim")) return {"dim", site_at(x)};
  return {"", {}};
}

std::pair<std::string, Builder::BugSite> Builder::dp_sync_bug(const Param& p,
                                                              const Coord& x) const {
  if (auto moe = moe_dp_sync_bug(p, x); moe.second.fires) return moe;
  if (p.local != layer(s.bug_layer()) + ".wq") return {"", {}};
  // x is the group's first member (dp and cp 0) on tp rank 0.
  if (s.bug("dp-grad-not-synced")) return {"skip", site_at(x, 0, true)};
  if (s.bug("dp-grad-mean-not-sum")) return {"mean", site_at(x, 0, true)};
  if (s.bug("zero3-grad-double-reduced")) return {"double", site_at(x, 0, true)};
  return {"", {}};
}

Builder::BugSite Builder::send_bug(const std::string& name, const Coord& from) const {
  // The micro-batch bug fires on micro-batch 1 (it sends micro-batch 0's
  // activation, the only other one already computed at that point).
  if (s.bug("pp-grad-send-wrong-microbatch") && name == grad(boundary_resid(s)))
    return site_at(from, 1, true);
  if (s.bug("vpp-send-wrong-chunk") && name == wrap_resid(s)) return site_at(from, 0, true);
  const int m = s.bug("pp-send-wrong-microbatch") ? 1 : 0;
  if (!(s.bug("pp-send-wrong-tensor") || s.bug("pp-send-wrong-microbatch")) ||
      name != boundary_resid(s))
    return {};
  return site_at(from, m, true);
}

std::string Builder::send_bug_source(const std::string& name, const Coord& from) const {
  if (s.bug("pp-send-wrong-microbatch") || s.bug("pp-grad-send-wrong-microbatch")) {
    Coord other = from;
    other.m = 0;
    return at(other, name);
  }
  // The input of the sender's chunk: virtual stage pp - 1's, not its output.
  if (s.bug("vpp-send-wrong-chunk")) return at(from, resid(s.stage_begin(s.pp - 1)));
  // The layer output minus its MLP: the attention residual of that layer.
  const int i = std::stoi(name.substr(1)) - 1;
  return at(from, layer(i) + ".h");
}

int64_t Builder::loss_token_count(const Coord&) const {
  if (s.bug("microbatch-loss-scale")) return s.local_batch() * s.S;
  if (s.bug("cp-loss-scale-local")) return s.B * (s.S / s.cp);
  return s.B * s.S;
}

}  // namespace shardproof::planner::transformer
