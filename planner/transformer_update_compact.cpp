// The optimizer half of the step in the compact form, as update_piece
// writes it rank by rank: per parameter piece and stage, the gradient
// accumulated over micro-batches as one chain of templates (the first link
// adds the first two contributions, later links one more each, the last one
// carries the claim), the sequence-parallel sum over tp, the data-parallel
// all-reduce (or ZeRO reduce-scatter / shard) over dp x cp (an expert
// block's over its edp x cp group), and the optimizer step, each written
// once.
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

void Builder::update_piece_compact(const Param& p) {
  const Coord x = devices(p.stage).front();
  // W contributions per micro-batch (two for the tied table on one stage:
  // the LM head's, then the lookup's), summed in that order.
  const std::vector<std::string>& whats = grad_whats_[{grad_key(x), p.local}];
  const int W = int(whats.size()), M = s.mb;
  if (W == 0) throw std::logic_error("transformer planner: no gradient for " + p.local);
  const Ix mb = Ix::axis("mb");
  auto term = [&](int j, const Ix& m) {
    Coord xm = x;
    xm.m = m;
    return at(xm, whats[size_t(j)]);
  };
  const Shape shape = g.shape(term(0, mb));
  const int n_dp = s.dp * s.cp;
  const bool sync_sp = s.sp && p.full.size() == 1;  // norm weights saw their tokens only
  // Over dp x cp, or (the expert mesh) an expert block over its edp group,
  // where ZeRO shards it too.
  const bool over_edp = synced_over_edp(p);
  const bool sync_dp = (n_dp > 1 && dp_replicated(p)) || over_edp;
  const bool zero = s.zero > 0 && ((n_dp > 1 && dp_replicated(p)) || zero_over_edp(p));
  // The tensor a step writes: claimed when it is the last one (as in update_piece).
  auto output = [&](const std::string& tag, bool last, const Shape& sh) {
    const std::string local = at_rank(x, grad(p.local) + "." + tag);
    if (last)
      declare(x, local, grad(p.logical), zero ? zero_slice(p, x) : slice_of(x, p.full, p.spec));
    else
      g.tensor(x, local, sh, std::nullopt, "f32");
    return local;
  };
  // The micro-batches lo..hi as a condition ("" for all of them).
  auto mbs = [&](int lo, int hi) {
    if (lo == hi) return "mb == " + str(lo);
    return all_of({lo > 0 ? "mb >= " + str(lo) : "", hi < M - 1 ? "mb <= " + str(hi) : ""});
  };

  const bool accumulated = !sync_sp && !sync_dp;
  const std::string acc = grad(p.local) + ".acc";
  std::string cur;
  if (W * M == 1) {
    cur = term(0, 0);
    if (accumulated) {
      output("acc", true, shape);
      g.op(at_rank(x, acc), "scale", {cur}, {at_rank(x, acc)}, {{"factor", 1}});
      cur = at_rank(x, acc);
    }
  } else {
    // Term k = W*mb + j; acc{k} = acc{k-1} + term{k} for k >= 1, acc{0}
    // being term{0}. The last link (k = W*M - 1) carries the claim.
    for (int j = 0; j < W; ++j) {
      const Aff k = Aff(mb) * W + j;
      const std::string link = at_rank(x, acc) + k.text();
      const int lo = j == 0 ? 1 : 0, hi = M - 1;
      if (lo > hi) continue;
      const int last_mb = j == W - 1 ? hi : -1;  // where the link is the last one
      if (lo <= hi - (last_mb == hi ? 1 : 0)) {
        Graph::When links(g, mbs(lo, last_mb == hi ? hi - 1 : hi));
        output("acc" + k.text(), false, shape);
      }
      if (last_mb == hi) {
        Graph::When final(g, mbs(hi, hi));
        if (accumulated)
          output("acc" + k.text(), true, shape);
        else
          declare_partial(x, p, at_rank(x, acc) + k.text(), shape, true);
      }
      // The micro-batch whose link k is 1: it adds term{0} itself.
      const int first = W == 1 ? 1 : j == 1 ? 0 : -1;
      if (first == lo) {
        Graph::When one(g, mbs(lo, lo));
        g.op(link, "add", {term(0, 0), term(j, mb)}, {link});
      }
      if (const int from = first == lo ? lo + 1 : lo; from <= hi) {
        Graph::When later(g, mbs(from, hi));
        g.op(link, "add", {at_rank(x, acc) + (k - 1).text(), term(j, mb)}, {link});
      }
    }
    cur = at_rank(x, acc) + str(W * M - 1);
  }

  // Sequence parallel: each tp rank summed only its own tokens.
  if (sync_sp) {
    Coord first = x;  // collectives are named at their first member
    first.t = 0;
    const std::string out = output("sp", !sync_dp, shape);
    const std::string name = at_rank(first, grad(p.local) + ".sp_all_reduce");
    const bool bug = s.bug("sp-norm-grad-not-reduced") && p.local == layer(s.bug_layer()) + ".an.w";
    branch(bug ? site_at(first) : BugSite{}, [&](bool buggy) {
      if (buggy)
        collective(name + ".solo" + x.t.text(), "all_reduce", {cur}, {out}, solo_group(x));
      else
        collective(name, "all_reduce", {cur}, {out}, tp_group(x));
    });
    cur = out;
  }

  if (sync_dp && dp_sync_on_tp_group(p)) {
    // Bug dp-grad-on-tp-group: the tp group (of the dp group's size) sums
    // it, named at its first member, as update_piece writes it.
    Coord first = x;
    first.t = 0;
    const std::string out = output("dp", true, shape);
    collective(at_rank(first, grad(p.local) + ".dp_all_reduce"), "all_reduce", {cur}, {out},
               tp_group(x));
    cur = out;
  } else if (sync_dp) {
    Shape sh = shape;
    if (zero && s.zero == 2) sh[0] /= zero_ways(p);
    const std::string out = output(zero ? "dp_shard" : "dp", !(zero && s.zero == 1), sh);
    // Named at the group's first member: dp rank 0, or the edp (x cp)
    // group's, 0 along its axes (the ep axis stays on the expert mesh, the
    // dp rank itself at ep = dp, whose group is its cp ranks).
    const Group group = over_edp ? edp_group() : dp_cp_group(x);
    dp_sync(p, mesh().zeroed(x, group.axes), {cur}, {out}, group, zero && s.zero >= 2);
    cur = out;
  }
  // ZeRO-1: every rank has the whole sum and keeps its own shard.
  if (zero && s.zero == 1) {
    Shape sh = shape;
    const int64_t len = sh[0] / zero_ways(p);
    sh[0] = len;
    const std::string shard = output("shard", true, sh);
    const Aff j = zero_index(p, x);
    g.op(at_rank(x, grad(p.local) + ".shard"), "slice", {cur}, {shard},
         {{"dim", 0}, {"start", (j * len).attr()}, {"end", (j * len + len).attr()}});
    cur = shard;
  }
  // With --clip the step waits for the global norm (finish_updates).
  if (s.c.clip)
    pending_.push_back({&p, x, cur, zero, false});
  else
    step(p, x, cur, zero);
}

}  // namespace shardproof::planner::transformer
