// The optimizer half of the step in the compact form: per parameter piece
// and stage, the gradient accumulated over micro-batches as one chain of
// templates (the first link adds micro-batch 0 and 1, later links add one
// more, the last one carries the claim), the data-parallel all-reduce over
// the dp axis, and the optimizer step, each written once.
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string compact_unsupported(const Layout& s) {
  if (s.tie) return "--tie-embeddings";
  // A gather in reverse rank order: the compact form orders a group's
  // members by their coordinates.
  for (const char* order : {"reshard-gather-order", "sp-allgather-order", "zero-allgather-order",
                            "cp-kv-allgather-order", "all-to-all-wrong-order"})
    if (s.c.bug == order) return "--bug " + s.c.bug;
  // A kv head shared by several tp ranks is head t / replicas: not affine.
  if (s.tp > s.NKV) return "tp (" + str(s.tp) + ") above the kv heads (" + str(s.NKV) + ")";
  return "";
}

void Builder::update_piece_compact(const Param& p) {
  const Coord x = devices(p.stage).front();
  const std::vector<std::string>& whats = grad_whats_[{grad_key(x), p.local}];
  // One contribution per micro-batch (compact_unsupported rules out the
  // tied table, the one piece with two).
  if (whats.size() != 1)
    throw std::logic_error("transformer planner: compact gradient of " + p.local +
                           " has not one contribution per micro-batch");
  const Ix mb = Ix::axis("mb");
  auto term = [&](const Ix& m) {
    Coord xm = x;
    xm.m = m;
    return at(xm, whats[0]);
  };
  const Shape shape = g.shape(term(mb));
  const int n_dp = s.dp * s.cp;
  const bool sync_sp = s.sp && p.full.size() == 1;  // norm weights saw their tokens only
  const bool sync_dp = n_dp > 1 && dp_replicated(p);
  const bool zero = s.zero > 0 && sync_dp;
  // The tensor a step writes: claimed when it is the last one (as in update_piece).
  auto output = [&](const std::string& tag, bool last, const Shape& sh) {
    const std::string local = at_rank(x, grad(p.local) + "." + tag);
    if (last)
      declare(x, local, grad(p.logical), zero ? zero_slice(p, x) : slice_of(x, p.full, p.spec));
    else
      g.tensor(x, local, sh, std::nullopt, "f32");
    return local;
  };

  const bool accumulated = !sync_sp && !sync_dp;
  const std::string acc = grad(p.local) + ".acc";
  std::string cur;
  if (s.mb == 1) {
    cur = term(0);
    if (accumulated) {
      output("acc", true, shape);
      g.op(at_rank(x, acc), "scale", {cur}, {at_rank(x, acc)}, {{"factor", 1}});
      cur = at_rank(x, acc);
    }
  } else {
    // acc{k} = acc{k-1} + term{k} for k >= 1, where acc{0} is term{0}.
    const int M = s.mb;
    const Ix prev = Ix::axis("mb", -1);
    const std::string link = at_rank(x, acc) + mb.text(), before = at_rank(x, acc) + prev.text();
    if (M >= 3) {
      Graph::When middle(g, "mb >= 1 && mb <= " + str(M - 2));
      output("acc" + mb.text(), false, shape);
    }
    {
      Graph::When final(g, "mb == " + str(M - 1));
      output("acc" + mb.text(), accumulated, shape);
    }
    {
      Graph::When first(g, "mb == 1");
      g.op(link, "add", {term(prev), term(mb)}, {link});
    }
    if (M >= 3) {
      Graph::When later(g, "mb >= 2");
      g.op(link, "add", {before, term(mb)}, {link});
    }
    cur = at_rank(x, acc) + str(M - 1);
  }

  // Sequence parallel: each tp rank summed only its own tokens.
  if (sync_sp) {
    Coord first = x;  // collectives are named at their first member
    first.t = 0;
    const std::string out = output("sp", !sync_dp, shape);
    const std::string name = at_rank(first, grad(p.local) + ".sp_all_reduce");
    const bool bug =
        s.bug("sp-norm-grad-not-reduced") && p.local == layer(s.bug_layer()) + ".an.w";
    branch(bug ? site_at(first) : BugSite{}, [&](bool buggy) {
      if (buggy)
        collective(name + ".solo" + x.t.text(), "all_reduce", {cur}, {out}, solo_group(x));
      else
        collective(name, "all_reduce", {cur}, {out}, tp_group(x));
    });
    cur = out;
  }

  if (sync_dp) {
    Shape sh = shape;
    if (s.zero == 2) sh[0] /= n_dp;
    const std::string out = output(zero ? "dp_shard" : "dp", s.zero != 1, sh);
    Coord first = x;
    first.d = 0;
    first.c = 0;
    dp_sync(p, first, {cur}, {out}, dp_cp_group(x));
    cur = out;
  }
  // ZeRO-1: every rank has the whole sum and keeps its own shard.
  if (zero && s.zero == 1) {
    Shape sh = shape;
    const int64_t len = sh[0] / n_dp;
    sh[0] = len;
    const std::string shard = output("shard", true, sh);
    const Aff j = Aff(x.d) * s.cp + x.c;
    g.op(at_rank(x, grad(p.local) + ".shard"), "slice", {cur}, {shard},
         {{"dim", 0}, {"start", (j * len).attr()}, {"end", (j * len + len).attr()}});
    cur = shard;
  }
  step(p, x, cur, zero);
}

}  // namespace shardproof::planner::transformer
