// The training-step bug catalogue of the transformer families: gradient
// clipping (--clip), gradient accumulation, collectives on a wrong group of
// the right size, pipeline gradient sends, ZeRO partitions and the tied
// table under a distributed optimizer. What each stands for, when it
// applies, and the logical tensor its finding names.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string needs(bool ok, const std::string& why) {
  return ok ? "" : "needs " + why;
}

std::string ref_wq(const Layout& s) {
  return layer(s.bug_layer()) + ".wq";
}

}  // namespace

std::string clip_total(const Layout& s) {
  return s.moe() ? "clip.dense.ss" : "clip.ss";
}

const std::vector<BugSpec>& step_bug_table() {
  static const std::vector<BugSpec> bugs = {
      {{"clip-norm-local-shard",
        "with --clip each rank clips by the norm of its own gradient pieces: the norm's sum of "
        "squares is never all-reduced",
        "gradient norm taken over the local shard only"},
       [](const Layout& s) {
         return needs(s.c.clip && (s.tp >= 2 || s.pp >= 2 || s.zero > 0),
                      "--clip and pieces spread over ranks (tp >= 2, pp >= 2 or zero)");
       },
       [](const Layout& s) { return clip_total(s); }},
      {{"clip-norm-replicated-counted-tp",
        "with --clip the gradients replicated over tp (norm weights, the router, shared kv "
        "heads) enter the norm on every tp rank: counted tp times",
        "replicated parameters counted once per tensor-parallel rank in the gradient norm"},
       [](const Layout& s) { return needs(s.c.clip && s.tp >= 2, "--clip and tp >= 2"); },
       [](const Layout& s) { return clip_total(s); }},
      {{"clip-norm-missing-pp",
        "with --clip the norm's sum of squares is all-reduced within each pipeline stage only",
        "pipeline-parallel group left out of the gradient norm reduction"},
       [](const Layout& s) { return needs(s.c.clip && s.pp >= 2, "--clip and pp >= 2"); },
       [](const Layout& s) { return clip_total(s); }},
      {{"clip-before-reduce",
        "with --clip the reference layer's wq enters the norm with each rank's gradient before "
        "the data-parallel all-reduce",
        "gradient norm (clipping) computed before the gradient reduction"},
       [](const Layout& s) {
         return needs(s.c.clip && s.dp * s.cp >= 2 && s.zero == 0,
                      "--clip, dp * cp >= 2 and zero 0");
       },
       [](const Layout& s) { return "clip." + ref_wq(s) + ".sq"; }},
      {{"microbatch-grad-dropped",
        "the gradient accumulation of the reference layer's wq leaves out micro-batch 1's "
        "gradient (dp 0, tp 0)",
        "a micro-batch's gradient dropped from the accumulation"},
       [](const Layout& s) { return needs(s.mb >= 2, "microbatches >= 2"); },
       [](const Layout& s) { return grad(ref_wq(s)); }},
      {{"microbatch-grad-added-twice",
        "the gradient accumulation of the reference layer's wq adds micro-batch 1's gradient "
        "twice (dp 0, tp 0)",
        "a micro-batch's gradient accumulated twice"},
       [](const Layout& s) { return needs(s.mb >= 2, "microbatches >= 2"); },
       [](const Layout& s) { return grad(ref_wq(s)); }},
      {{"accumulate-across-reduce",
        "micro-batch 0's gradient of the reference layer's wq is all-reduced over dp before it "
        "is accumulated, and the accumulated gradient is all-reduced again: counted dp times",
        "gradient accumulation across a reduction (DDP sync not disabled for early "
        "micro-batches)"},
       [](const Layout& s) {
         return needs(s.dp >= 2 && s.mb >= 2 && s.zero == 0, "dp >= 2, microbatches >= 2, zero 0");
       },
       // dp rank 0's accumulated partial sum (its rows) is what breaks.
       [](const Layout& s) {
         if (s.cp > 1 || s.sp) return grad(ref_wq(s));
         return grad(ref_wq(s)) + " over [0:" + std::to_string(s.local_batch() * s.S * s.mb) + "]";
       }},
      {{"dp-grad-on-tp-group",
        "the reference layer's wq gradient is all-reduced over the tp group (of the same size) "
        "instead of the dp group",
        "collective on a wrong process group of the right size (tp group where dp is due)"},
       [](const Layout& s) {
         return needs(s.tp >= 2 && s.dp * s.cp == s.tp && s.zero == 0,
                      "dp * cp == tp >= 2 and zero 0");
       },
       [](const Layout& s) { return grad(ref_wq(s)); }},
      {{"sp-grad-on-dp-group",
        "under sequence parallelism the reference layer's attention norm weight gradient is summed "
        "over the dp group (of the same size) instead of the tp group, then over dp as usual",
        "collective on a wrong process group of the right size (dp group where tp is due)"},
       [](const Layout& s) { return needs(s.sp && s.dp * s.cp == s.tp, "sp and dp * cp == tp"); },
       [](const Layout& s) { return grad(layer(s.bug_layer()) + ".an.w"); }},
      {{"zero3-param-gather-order",
        "ZeRO-3: the all-gather of the reference layer's wq shards before the forward "
        "concatenates them in reverse rank order (tp rank 0)",
        "ZeRO-3 / FSDP parameter shards gathered in the wrong order"},
       [](const Layout& s) { return needs(s.zero == 3, "zero 3"); },
       [](const Layout& s) { return ref_wq(s); }},
      {{"zero3-grad-double-reduced",
        "ZeRO-3: the reference layer's wq gradient is all-reduced over dp (the parameter "
        "all-gather's backward) and then reduce-scattered again (tp rank 0): counted dp times",
        "gather backward double counting (the all-gather's backward reduces, then the "
        "data-parallel hook reduces again)"},
       [](const Layout& s) { return needs(s.zero == 3, "zero 3"); },
       [](const Layout& s) { return grad(ref_wq(s)); }},
      {{"pp-grad-send-wrong-microbatch",
        "the pipeline send of a stage boundary's gradient (backward) for micro-batch 1 carries "
        "micro-batch 0's gradient",
        "pipeline schedule sends the wrong micro-batch's gradient backward"},
       [](const Layout& s) {
         return needs(s.pp >= 2 && s.mb >= 2, "pp >= 2 and microbatches >= 2");
       },
       [](const Layout& s) { return grad(resid(s.stage_begin(s.pp / 2 > 0 ? s.pp / 2 : 1))); }},
      {{"zero-partition-id",
        "ZeRO-1: every dp rank keeps the next rank's shard of the reference layer's summed wq "
        "gradient (tp rank 0) while stepping its own parameter shard",
        "ZeRO partition index off by one (shard of another rank)"},
       [](const Layout& s) { return needs(s.zero == 1, "zero 1"); },
       [](const Layout& s) { return grad(ref_wq(s)); }},
      {{"tied-shard-mismatch",
        "ZeRO with tied embeddings on two stages: the first stage's table gradient shard is "
        "summed with another dp rank's shard on the last stage",
        "distributed optimizer: tied embedding shards paired across different dp ranks"},
       [](const Layout& s) {
         return needs(s.tie && s.pp >= 2 && s.zero > 0 && s.dp >= 2,
                      "tie_embeddings, pp >= 2, zero and dp >= 2");
       },
       [](const Layout&) { return grad("emb"); }},
      {{"dropout-rng-replicated-differs",
        "with --dropout tp ranks 1.. draw the reference layer's MLP-output mask (replicated over "
        "tp) from their own generator state (dp 0, micro-batch 0)",
        "dropout RNG out of step across tensor-parallel ranks on a replicated activation"},
       [](const Layout& s) {
         return needs(s.c.dropout && s.tp >= 2 && !s.sp, "--dropout, tp >= 2 and no sp");
       },
       [](const Layout& s) { return layer(s.bug_layer()) + ".mlp.mask"; }},
      {{"dropout-rng-sharded-same",
        "with --dropout and sp every tp rank draws its sequence piece's MLP-output mask at tp rank "
        "0's positions: one mask for every piece (dp 0, micro-batch 0)",
        "dropout in a sequence-parallel region outside the tensor-parallel RNG tracker"},
       [](const Layout& s) { return needs(s.c.dropout && s.sp, "--dropout and sp"); },
       [](const Layout& s) { return layer(s.bug_layer()) + ".mlp.mask"; }},
      {{"schedule-sendrecv-swapped",
        "with --schedule the last pipeline stage posts its steady-state send before its receive, "
        "as its neighbour does: both wait to send",
        "pipeline schedule with a send/recv pair swapped on one stage (deadlock)"},
       [](const Layout& s) {
         return needs(s.c.schedule && s.mb >= 2 && s.vpp == 1,
                      "--schedule (pp >= 2), microbatches >= 2 and no --vpp");
       },
       [](const Layout&) { return std::string("schedule"); }},
      {{"schedule-missing-warmup",
        "with --schedule the first pipeline stage runs one warm-up forward fewer than 1F1B needs",
        "pipeline schedule missing a warm-up step (deadlock)"},
       [](const Layout& s) {
         // The interleaved schedule posts each unit's receives with the
         // previous unit's sends: one warm-up forward fewer only moves a
         // forward past a backward (no hazard for pp >= 3), so it is not this bug.
         return needs(s.c.schedule && s.mb >= s.pp && s.vpp == 1,
                      "--schedule (pp >= 2), microbatches >= pp and no --vpp");
       },
       [](const Layout&) { return std::string("schedule"); }},
      {{"schedule-vpp-unbatched",
        "with --schedule and --vpp every pipeline rank posts each batch of the interleaved "
        "schedule (the sends of the unit just run and the receives of the next) as blocking "
        "sends, then blocking receives: the ring of ranks all wait to send",
        "batch_isend_irecv replaced by sequential blocking send and recv in the interleaved "
        "pipeline (deadlock)"},
       [](const Layout& s) {
         return needs(s.c.schedule && s.vpp >= 2, "--schedule (pp >= 2) and --vpp >= 2");
       },
       [](const Layout&) { return std::string("schedule"); }},
  };
  return bugs;
}

// --- the builder's hooks

void Builder::accumulate(const Param& p, const Coord& x, size_t k, const std::string& acc,
                         const std::string& term, const std::string& next) {
  const std::string name = at_rank(x, grad(p.local) + ".acc" + std::to_string(k));
  const bool here =
      !s.logical && p.local == ref_wq(s) && x.d == 0 && x.c == 0 && x.t == 0 && k == 1;
  if (here && s.bug("microbatch-grad-dropped")) {
    g.op(name, "scale", {acc}, {next}, {{"factor", 1}});
    return;
  }
  if (here && s.bug("microbatch-grad-added-twice")) {
    const std::string mid = name + ".twice";
    g.tensor(x, mid, g.shape(acc), std::nullopt, "f32");
    g.op(name + ".first", "add", {acc, term}, {mid});
    g.op(name, "add", {mid, term}, {next});
    return;
  }
  g.op(name, "add", {acc, term}, {next});
}

void Builder::rewrite_terms(const Param& p) {
  if (s.logical) return;
  if (s.bug("accumulate-across-reduce") && p.local == ref_wq(s))
    for (const Coord& x : devices(p.stage)) {
      if (x.d != 0 || x.c != 0) continue;
      std::vector<std::string> in, out;
      const Group group = dp_cp_group(x);
      for (Coord xd = x; xd.d < s.dp; ++xd.d)
        for (xd.c = 0; xd.c < s.cp; ++xd.c) {
          std::string& first = grads_[{rank(xd), p.local}].front();
          in.push_back(first);
          out.push_back(at_rank(xd, grad(p.local) + ".mb0.reduced"));
          g.tensor(xd, out.back(), g.shape(first), std::nullopt, "f32");
          first = out.back();
        }
      collective(at_rank(x, grad(p.local) + ".mb0.dp_all_reduce"), "all_reduce", in, out, group);
    }
  if (s.bug("expert-grad-scaled-by-dp") && p.local == layer(s.moe_bug_layer()) + ".moe.wg")
    for (const Coord& x : devices(p.stage)) {
      std::vector<std::string>& terms = grads_[{rank(x), p.local}];
      for (size_t k = 0; k < terms.size(); ++k) {
        const std::string scaled = at_rank(x, grad(p.local) + ".avg" + std::to_string(k));
        g.tensor(x, scaled, g.shape(terms[k]), std::nullopt, "f32");
        g.op(scaled, "scale", {terms[k]}, {scaled}, {{"factor", "1/" + std::to_string(s.dp)}});
        terms[k] = scaled;
      }
    }
}

bool Builder::dp_sync_on_tp_group(const Param& p) const {
  return s.bug("dp-grad-on-tp-group") && p.local == ref_wq(s);
}

std::vector<Coord> Builder::sp_sync_members(const Param& p, const Coord& x) const {
  std::vector<Coord> members;
  if (s.bug("sp-grad-on-dp-group") && p.local == layer(s.bug_layer()) + ".an.w")
    return x.d == 0 && x.c == 0 ? dp_cp_members(x) : members;
  if (x.t != 0) return members;
  for (Coord xt = x; xt.t < s.tp; ++xt.t) members.push_back(xt);
  return members;
}

std::vector<std::string> Builder::reduce_twice(const Param& p, const Coord& x,
                                               const std::vector<std::string>& in,
                                               const Group& group) {
  std::vector<std::string> reduced;
  for (const Coord& xd : dp_cp_members(x)) {
    reduced.push_back(at_rank(xd, grad(p.local) + ".gather_backward"));
    g.tensor(xd, reduced.back(), g.shape(in[reduced.size() - 1]), std::nullopt, "f32");
  }
  collective(at_rank(x, grad(p.local) + ".gather_backward_all_reduce"), "all_reduce", in, reduced,
             group, {{"reduce", "sum"}});
  return reduced;
}

int64_t Builder::zero_partition(const Param& p, const Coord& x) const {
  const int64_t n = zero_ways(p), j = zero_index(p, x).value();
  if (s.bug("zero-partition-id") && p.local == ref_wq(s) && x.t == 0) return (j + 1) % n;
  // The expert block's shard at the dp rank's place, not the edp group's.
  if (s.bug("zero-expert-shard-dp-rank") && p.local == layer(s.moe_bug_layer()) + ".moe.wg" &&
      x.t == 0)
    return int64_t(x.d) % n;
  return j;
}

Ix Builder::tied_partner_dp(const Coord& x) const {
  if (!s.bug("tied-shard-mismatch")) return x.d;
  return Ix((int(x.d) + 1) % s.dp);
}

}  // namespace shardproof::planner::transformer
