// Two options that make correct plans look suspicious, and their bugs:
//  --bias: the attention output projection has a bias `l{i}.bo`. Under tp the
//    projection is row-parallel, so its output is a sum of tp partials; the
//    bias is added on tp rank 0 only, before the all-reduce (adding it on
//    every rank would count it tp times: bug bias-on-every-rank).
//  --reshard-residual (tp >= 2, no sp): each layer's output, replicated over
//    tp, is sliced to the tp rank's hidden block and all-gathered back: a
//    round trip that changes nothing (gathering in the wrong order: bug
//    reshard-gather-order).
#include <algorithm>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kResid = {Ax::Batch, Ax::SeqSp, Ax::Full};

std::string needs(bool ok, const std::string& why) {
  return ok ? "" : "needs " + why;
}

}  // namespace

const std::vector<BugSpec>& option_bug_table() {
  static const std::vector<BugSpec> bugs = {
      {{"bias-on-every-rank",
        "with --bias the attention output bias is added on every tp rank before the all-reduce "
        "(reference layer): tp times the bias",
        "bias of a row-parallel linear added before the reduction on every rank"},
       [](const Layout& s) { return needs(s.c.bias && s.tp >= 2, "--bias and tp >= 2"); },
       [](const Layout& s) { return layer(s.bug_layer()) + ".attn"; }},
      {{"reshard-gather-order",
        "with --reshard-residual the reference layer's output is all-gathered back from its tp "
        "hidden blocks in reverse rank order",
        "all-gather with the wrong rank order"},
       [](const Layout& s) {
         return needs(s.c.reshard_residual && s.tp >= 2, "--reshard-residual and tp >= 2");
       },
       [](const Layout& s) { return resid(s.bug_layer() + 1); }},
  };
  return bugs;
}

void Builder::output_projection(const Coord& x, int i, const std::string& out) {
  const std::string l = layer(i);
  const std::string ctx = at(x, l + ".ctx.flat"), wo = weight(x, l + ".wo");
  auto with_bias = [&] {
    std::string proj = scratch(x, l + ".wo.proj", g.shape(out));
    op(x, l + ".wo.matmul", "matmul", {ctx, wo}, {proj});
    op(x, l + ".bo.add", "add", {proj, weight(x, l + ".bo")}, {out});
  };
  auto without_bias = [&] { op(x, l + ".wo.matmul", "matmul", {ctx, wo}, {out}); };
  if (!s.c.bias) return without_bias();
  // Only tp rank 0 adds the bias, unless the bug has every rank add it.
  const BugSite every = s.bug("bias-on-every-rank") && i == s.bug_layer() ? site_at(x) : BugSite{};
  auto rest = [&] { branch(every, [&](bool buggy) { buggy ? with_bias() : without_bias(); }); };
  if (!sym()) return x.t == 0 ? with_bias() : rest();
  {
    Graph::When first(g, mesh().tp0());
    with_bias();
  }
  for (const std::string& others : mesh().tp_rest()) {
    Graph::When there(g, others);
    rest();
  }
}

void Builder::bias_backward(int i, Coord x0) {
  if (!s.c.bias) return;
  const std::string l = layer(i);
  // d bo = d attn summed over this rank's tokens. Under sequence parallelism
  // that is the rank's sequence piece, summed over tp in update_piece like
  // the norm weights; under cp the dp x cp all-reduce sums the chunks.
  each_cp_tp(x0, [&](const Coord& x) {
    std::string gb =
        grad_target(x, l + ".bo", "mb", {s.H},
                    {g.shape(at(x, grad(l + ".h")))[0], g.shape(at(x, grad(l + ".h")))[1]});
    op(x, grad(l + ".bo") + ".sum", "sum", {at(x, grad(l + ".h"))}, {gb}, {{"dims", {0, 1}}});
  });
}

std::string Builder::resid_out(const Coord& x, int i) {
  const Shape hs = {s.B, s.S, s.H};
  if (!resharding()) return act(x, resid(i), hs, kResid);
  // Unclaimed: a claim of the whole resid(i) here would share a claim group
  // with the gathered copy, whose stage cuts the logical graph at resid(i)
  // itself (the pieces claim its slices) and so cannot prove this one.
  return scratch(x, resid(i) + ".whole", extent(slice_of(x, hs, kResid)));
}

void Builder::reshard_resid(Coord x0, int i) {
  if (!resharding()) return;
  const Shape hs = {s.B, s.S, s.H};
  const int64_t block = s.H / s.tp;
  each_cp(x0, [&](const Coord& xc) {
    std::vector<std::string> in, out;
    each_tp(xc, [&](const Coord& x) {
      std::string piece =
          claim(x, at(x, resid(i)) + ".piece", resid(i), hs, {Ax::Batch, Ax::SeqSp, Ax::Tp});
      op(x, resid(i) + ".scatter", "slice", {at(x, resid(i)) + ".whole"}, {piece},
         {{"dim", 2},
          {"start", (Aff(x.t) * block).attr()},
          {"end", (Aff(x.t) * block + block).attr()}});
      in.push_back(piece);
      out.push_back(act(x, resid(i), hs, kResid));
    });
    Coord xg = xc;
    xg.t = 0;
    Group group = tp_group(xg);
    if (fires("reshard-gather-order", i - 1, xg)) {
      std::reverse(in.begin(), in.end());
      std::reverse(out.begin(), out.end());
      std::reverse(group.ranks.begin(), group.ranks.end());
    }
    collective(at(xg, resid(i) + ".reshard_all_gather"), "all_gather", in, out, group,
               {{"dim", 2}});
  });
}

}  // namespace shardproof::planner::transformer
