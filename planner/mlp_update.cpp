// After the micro-batches: gradient accumulation, the data-parallel
// all-reduce, the optimizer step, and the loss reduction.
#include "planner/mlp_parallel.h"

namespace shardproof::planner::mlp {

std::string ParallelBuilder::accumulate(const std::vector<std::string>& terms,
                                        const std::string& result, int rank, const Shape& shape,
                                        const Claim& claim) {
  if (terms.size() == 1) return terms[0];  // it already carries `claim`
  std::string acc = terms[0];
  for (size_t m = 1; m < terms.size(); ++m) {
    bool last = m + 1 == terms.size();
    // Running sums of some micro-batches are not parts of anything: no claim.
    std::string out = last ? result : result + ".acc" + std::to_string(m);
    if (last)
      g.tensor(out, shape, rank, claim);
    else
      g.tensor(out, shape, rank);
    g.op(out + ".add", "add", {acc, terms[m]}, {out});
    acc = out;
  }
  return acc;
}

void ParallelBuilder::update_layer(int i) {
  const int p = s.stage_of(i);
  const std::string w = weight(i), gw = grad(weight(i));
  for (int t = 0; t < s.tp; ++t) {
    const Slice ws = weight_slice(i, t);
    const Shape shape = extent(ws);
    std::vector<std::string> local(s.dp), synced(s.dp);
    for (int d = 0; d < s.dp; ++d) {
      int r = s.rank(d, t, p);
      std::vector<std::string> terms;
      for (int m = 0; m < s.mb; ++m) terms.push_back(at(d, t, p, m, gw));
      // Accumulated over micro-batches: rank d's part of the global gradient.
      std::string name = at_rank(d, t, p, s.dp > 1 ? gw + ".local" : gw);
      local[d] = accumulate(terms, name, r, shape, Claim{gw, ws, d, s.dp});
      synced[d] = local[d];
    }
    bool site = i == 0 && t == 0;
    // dp-grad-not-synced: every rank steps with its own part of w0's gradient.
    if (s.dp > 1 && !(i == 0 && s.bug("dp-grad-not-synced"))) {
      std::string op = "tp" + std::to_string(t) + ".pp" + std::to_string(p) + "." + gw;
      std::vector<std::string> in = local;
      if (site && s.bug("dp-grad-double-allreduce")) {
        // A second all-reduce of an already summed gradient: dp times too big.
        for (int d = 0; d < s.dp; ++d) {
          synced[d] = at_rank(d, t, p, gw + ".once");
          g.tensor(synced[d], shape, s.rank(d, t, p), Claim{gw, ws});
        }
        g.collective(op + ".dp_all_reduce.once", "all_reduce", in, synced, dp_group(t, p),
                     {{"reduce", "sum"}});
        in = synced;
      }
      for (int d = 0; d < s.dp; ++d) {
        synced[d] = at_rank(d, t, p, gw);
        g.tensor(synced[d], shape, s.rank(d, t, p), Claim{gw, ws});
      }
      // dp-grad-mean-not-sum: averaging although every part is already
      // scaled by 1/(global count).
      std::string reduce = site && s.bug("dp-grad-mean-not-sum") ? "mean" : "sum";
      g.collective(op + ".dp_all_reduce", "all_reduce", in, synced, dp_group(t, p),
                   {{"reduce", reduce}});
    }
    for (int d = 0; d < s.dp; ++d) {
      int r = s.rank(d, t, p);
      auto here = [&](const std::string& name) { return at_rank(d, t, p, name); };
      g.tensor(here(next(w)), shape, r, Claim{next(w), ws});
      g.output(here(next(w)));
      if (!s.adam()) {
        g.op(here(w + ".sgd"), "sgd", {here(w), synced[d]}, {here(next(w))}, optimizer_attrs(s));
        continue;
      }
      for (const std::string& st : {adam_m(i), adam_v(i)}) {
        g.tensor(here(next(st)), shape, r, Claim{next(st), ws});
        g.output(here(next(st)));
      }
      g.op(here(w + ".adam"), "adam", {here(w), synced[d], here(adam_m(i)), here(adam_v(i))},
           {here(next(w)), here(next(adam_m(i))), here(next(adam_v(i)))}, optimizer_attrs(s));
    }
  }
}

void ParallelBuilder::reduce_loss() {
  // Micro-batch parts -> rank d's part (add) -> the whole loss (dp
  // all-reduce), replicated on every tp rank of the last stage.
  const int p = s.last_stage();
  for (int t = 0; t < s.tp; ++t) {
    std::vector<std::string> local(s.dp), full(s.dp);
    for (int d = 0; d < s.dp; ++d) {
      std::vector<std::string> terms;
      for (int m = 0; m < s.mb; ++m) terms.push_back(at(d, t, p, m, "loss"));
      std::string name = at_rank(d, t, p, s.dp > 1 ? "loss.local" : "loss");
      local[d] = accumulate(terms, name, s.rank(d, t, p), {}, Claim{"loss", {}, d, s.dp});
      full[d] = local[d];
    }
    if (s.dp > 1) {
      for (int d = 0; d < s.dp; ++d) {
        full[d] = at_rank(d, t, p, "loss");
        g.tensor(full[d], {}, s.rank(d, t, p), Claim{"loss", {}});
      }
      g.collective("tp" + std::to_string(t) + ".pp" + std::to_string(p) + ".loss.dp_all_reduce",
                   "all_reduce", local, full, dp_group(t, p), {{"reduce", "sum"}});
    }
    for (const std::string& f : full) g.output(f);
  }
}

}  // namespace shardproof::planner::mlp
