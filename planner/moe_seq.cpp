// Sequence and context parallelism around an MoE layer. Routing groups are
// whole sequences (capacity is counted per sequence), so the tokens a rank
// holds (its cp chunk, under sp its tp piece of it) are all-gathered over tp
// and cp into whole sequences before routing; every tp and cp rank then
// routes, dispatches and combines the same whole sequences and keeps its own
// piece of the result. The backward all-gathers the output gradient the same
// way, so every rank computes the whole input gradient and keeps its piece
// (what the reduce-scatter of an all-gather's backward gives: every rank
// already holds the sum). Weight gradients computed from whole sequences
// would be counted cp times by the dp x cp sync: each cp rank contracts only
// its own tokens (router) or its own block of slots (experts).
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kResid = {Ax::Batch, Ax::SeqSp, Ax::Full};
const Spec kRow = {Ax::Batch, Ax::Full, Ax::Full};

}  // namespace

void Builder::gather_moe_tokens(Coord x0, const std::string& name) {
  const Shape hs = {s.B, s.S, s.H};
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, name, hs, kResid, 1); });
  if (s.cp == 1) return;
  each_tp(x0, [&](const Coord& xt) {
    std::vector<std::string> in, out;
    each_cp(xt, [&](const Coord& x) {
      in.push_back(gather_seq(x, name, hs, kResid, 1));
      out.push_back(claim(x, at(x, name) + ".cp", name, hs, kRow));
    });
    Coord xg = xt;  // named at the group's first member
    xg.c = 0;
    collective(at(xg, name + ".cp_all_gather"), "all_gather", in, out, cp_group(xg), {{"dim", 1}});
  });
}

std::string Builder::moe_tokens(const Coord& x, const std::string& name) {
  if (s.cp > 1) return at(x, name) + ".cp";
  return gather_seq(x, name, {s.B, s.S, s.H}, kResid, 1);
}

std::string Builder::own_tokens(const Coord& x, int i, const std::string& name) {
  if (!s.sp && s.cp == 1) return at(x, name);
  const Shape hs = {s.B, s.S, s.H};
  const int64_t pieces = int64_t(s.cp) * (s.sp ? s.tp : 1);
  const int64_t len = s.S / pieces;
  Aff k = s.sp ? Aff(x.c) * s.tp + x.t : Aff(x.c);
  std::string own = claim(x, at(x, name) + ".own", name, hs, kResid);
  const bool output = name == layer(i) + ".moe.y";
  // Bugs: the piece of the next rank (of the tp group under sp, of the cp
  // group otherwise) is kept. v1 only (the compact form refuses them).
  if (output && s.sp && moe_fires("moe-sp-combine-wrong-piece", i, x))
    k = Aff(int64_t(int(x.c) * s.tp + (int(x.t) + 1) % s.tp));
  if (output && s.cp > 1 && moe_fires("moe-cp-combine-wrong-chunk", i, x)) {
    const int64_t next = (int(x.c) + 1) % s.cp;
    k = s.sp ? Aff(next * s.tp + int(x.t)) : Aff(next);
  }
  op(x, name + ".own", "slice", {at(x, name)}, {own},
     {{"dim", 1}, {"start", (k * len).attr()}, {"end", (k * len + len).attr()}});
  return own;
}

void Builder::dispatch_tokens(const Coord& x, int i, const std::string& disp2, const std::string& n,
                              const std::string& xin2) {
  const std::string name = layer(i) + ".moe.xin.flat";
  // Bugs: the rank routes only the tokens it holds (its sp piece, or its cp
  // chunk) as if they were whole sequences: the other tokens' slots stay
  // empty.
  const bool local_sp = s.sp && moe_fires("moe-sp-dispatch-local-tokens", i, x);
  const bool local_cp = s.cp > 1 && moe_fires("moe-cp-dispatch-local-chunk", i, x);
  if (!local_sp && !local_cp) {
    op(x, name, "matmul", {disp2, n}, {xin2}, {{"transpose_a", true}});
    return;
  }
  const std::string mn = layer(i) + ".mn.out";
  const std::string local = local_sp ? at(x, mn) : gather_seq(x, mn, {s.B, s.S, s.H}, kResid, 1);
  const int64_t len = g.shape(local)[1];
  const int64_t k = local_sp ? int(x.c) * s.tp + int(x.t) : int(x.c);
  Shape rows = g.shape(disp2);
  rows[1] = len;
  std::string d = scratch(x, name + ".local_rows", rows);
  op(x, name + ".local_rows", "slice", {disp2}, {d},
     {{"dim", 1}, {"start", k * len}, {"end", (k + 1) * len}});
  op(x, name, "matmul", {d, local}, {xin2}, {{"transpose_a", true}});
}

std::string Builder::cp_own_rows(const Coord& x, const std::string& t, int dim,
                                 const std::string& name) {
  if (s.cp == 1) return t;
  Shape sh = g.shape(t);
  const int64_t len = sh[dim] / s.cp;
  sh[dim] = len;
  std::string own = scratch(x, name + ".cp_own", sh);
  op(x, name + ".cp_own", "slice", {t}, {own},
     {{"dim", dim}, {"start", (Aff(x.c) * len).attr()}, {"end", (Aff(x.c) * len + len).attr()}});
  return own;
}

}  // namespace shardproof::planner::transformer
