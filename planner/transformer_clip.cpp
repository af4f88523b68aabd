// Gradient clipping by global norm (--clip, as Megatron's clip_grad_norm
// does it), then the optimizer step on every piece.
//
// Logical: per parameter `clip.P.sq = square(grad.P)`, `clip.P.ss =
// sum(clip.P.sq)`; `clip.ss` their sum (MoE: `clip.dense.ss + clip.expert.ss`,
// each a sum over its parameters); `clip.norm = sqrt(clip.ss)`, `clip.coef =
// minimum(1 / (clip.norm + eps), 1)` (max norm 1); `grad.P.clipped =
// grad.P * clip.coef` goes to the optimizer.
//
// Parallel: each rank squares its synced gradient piece (its shard under
// ZeRO) and sums it, claimed as `clip.P.ss` restricted to the piece's box, so
// a piece counted twice or left out shows at the total. A piece replicated
// over tp (norm weights, the router), over kv replicas or on the tied
// table's last stage is counted on one holder only. Each rank adds its
// pieces and the sums are all-reduced over the ranks that hold distinct
// pieces: tp x pp (every dp x cp rank under ZeRO, whose shards differ; the
// ep group for experts under ep, whose blocks differ).
#include <algorithm>
#include <set>
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

bool tp_split(const Spec& spec) {
  for (Ax a : spec)
    if (a == Ax::Tp || a == Ax::Etp || a == Ax::Kv || a == Ax::TpGate || a == Ax::TpUp ||
        a == Ax::KvModulo)
      return true;
  return false;
}

bool expert_piece(const Spec& spec) {
  return !spec.empty() && spec[0] == Ax::Expert;
}

}  // namespace

void Builder::finish_updates() {
  if (s.c.clip) clip_gradients();
  for (const PendingStep& u : pending_) step(*u.p, u.x, u.g, u.zero);
  pending_.clear();
}

Builder::NormShare Builder::norm_share(const PendingStep& u) const {
  if (s.logical) return NormShare::All;
  if (u.tied_copy) return NormShare::None;
  // Bug: every tp rank counts what it holds, replicas included.
  if (s.bug("clip-norm-replicated-counted-tp")) return NormShare::All;
  const Spec& spec = u.p->spec;
  if (!tp_split(spec)) return NormShare::FirstTp;
  bool kv = false;
  for (Ax a : spec) kv = kv || a == Ax::Kv;
  if (kv && s.kv_replicas() > 1) return NormShare::FirstKvReplica;
  return NormShare::All;
}

bool Builder::norm_counts(const PendingStep& u) const {
  switch (norm_share(u)) {
    case NormShare::None:
      return false;
    case NormShare::All:
      return true;
    case NormShare::FirstTp:
      return u.x.t == 0;
    case NormShare::FirstKvReplica:
      return int(u.x.t) % s.kv_replicas() == 0;
  }
  return true;
}

std::vector<int> Builder::norm_group(const Coord& x, bool expert) const {
  if (expert && s.etp_split()) return etp_norm_group(x);
  // Whose pieces differ: tp x pp always; dp x cp under ZeRO (shards, and
  // expert blocks under 1 < ep < dp are ZeRO-sharded over edp: every dp rank
  // again); other expert blocks under ep: the ranks of x's ep group (blocks;
  // their edp and cp replicas hold the same pieces and get the same total).
  const bool expert_blocks = expert && s.ep > 1 && !(s.zero > 0 && s.ep < s.dp);
  bool across_dp = s.zero > 0 || expert_blocks;
  if (expert && s.bug("clip-norm-missing-ep")) across_dp = false;
  const bool across_pp = expert || !s.bug("clip-norm-missing-pp");
  auto same_ep_group = [&](int d) { return !expert_blocks || d / s.ep == int(x.d) / s.ep; };
  std::vector<int> group;
  for (int p = 0; p < s.pp; ++p)
    for (int d = 0; d < s.dp; ++d)
      for (int c = 0; c < s.cp; ++c)
        for (int t = 0; t < s.tp; ++t) {
          if (!across_pp && p != x.p) continue;
          if (!across_dp && (d != int(x.d) || c != int(x.c))) continue;
          // Unsharded expert blocks are replicated over cp.
          if (!same_ep_group(d) || (expert_blocks && c != int(x.c))) continue;
          group.push_back(s.rank(d, c, t, p));
        }
  return group;
}

std::string Builder::norm_tensor(const Coord& x, const std::string& local,
                                 const std::string& logical, const SymSlice& slice,
                                 std::vector<SymClaim::Over> over) {
  if (s.logical) {
    g.tensor(x, logical, extent(slice), std::nullopt, "f32");
    return logical;
  }
  g.tensor(x, local, extent(slice), SymClaim{logical, slice, 0, 1, std::move(over)}, "f32");
  return local;
}

// Adds `terms` on x's rank into `out` (declared); the links in between are
// unclaimed. No term: 0.
std::string Builder::sum_terms(const Coord& x, const std::string& name,
                               const std::vector<std::string>& terms, const std::string& out) {
  if (terms.empty()) {
    g.op(at_rank(x, name + ".zero"), "const", {}, {out},
         {{"value", 0}, {"shape", nlohmann::json::array()}, {"dtype", "f32"}});
    return out;
  }
  std::string acc = terms[0];
  if (terms.size() == 1) {
    g.op(at_rank(x, name + ".copy"), "scale", {acc}, {out}, {{"factor", 1}});
    return out;
  }
  for (size_t k = 1; k < terms.size(); ++k) {
    std::string next = out;
    if (k + 1 < terms.size()) {
      next = at_rank(x, name + ".acc" + std::to_string(k));
      g.tensor(x, next, {}, std::nullopt, "f32");
    }
    g.op(at_rank(x, name + ".add" + std::to_string(k)), "add", {acc, terms[k]}, {next});
    acc = next;
  }
  return out;
}

std::string Builder::piece_sum_of_squares(const PendingStep& u) {
  const Param& p = *u.p;
  const Coord& x = u.x;
  std::string src = u.g;
  // Bug: the norm reads the gradient before its data-parallel reduction.
  if (s.bug("clip-before-reduce") && p.local == layer(s.bug_layer()) + ".wq")
    src = presync_.at({p.local, rank(x)});
  const SymSlice slice = u.zero ? zero_slice(p, x) : slice_of(x, p.full, p.spec);
  const std::string base = "clip." + p.logical, mine = "clip." + p.local;
  std::string sq = norm_tensor(x, at_rank(x, mine + ".sq"), base + ".sq", slice);
  g.op(at_rank(x, mine + ".square"), "square", {src}, {sq});
  std::vector<SymClaim::Over> box;
  for (const auto& [lo, hi] : slice) box.push_back({lo, hi});
  std::string ss = norm_tensor(x, at_rank(x, mine + ".ss"), base + ".ss", {}, box);
  g.op(at_rank(x, mine + ".sum"), "sum", {sq}, {ss});
  return ss;
}

std::string Builder::clip_coefficient(const Coord& x, const std::string& ss) {
  auto named = [&](const std::string& logical) {
    return norm_tensor(x, at_rank(x, logical), logical, {});
  };
  const std::string norm = named("clip.norm"), den = named("clip.den");
  const std::string ratio = named("clip.ratio"), c = named("clip.coef");
  g.op(at_rank(x, "clip.sqrt"), "sqrt", {ss}, {norm});
  const std::string eps = at_rank(x, "clip.eps"), one = at_rank(x, "clip.one");
  g.tensor(x, eps, {}, std::nullopt, "f32");
  g.tensor(x, one, {}, std::nullopt, "f32");
  g.op(at_rank(x, "clip.eps.const"), "const", {}, {eps},
       {{"value", "1/1000000"}, {"shape", nlohmann::json::array()}});
  g.op(at_rank(x, "clip.one.const"), "const", {}, {one},
       {{"value", 1}, {"shape", nlohmann::json::array()}, {"dtype", "f32"}});
  g.op(at_rank(x, "clip.den.add"), "add", {norm, eps}, {den});
  g.op(at_rank(x, "clip.ratio.reciprocal"), "reciprocal", {den}, {ratio});
  g.op(at_rank(x, "clip.coef.minimum"), "minimum", {ratio, one}, {c});
  return c;
}

void Builder::clip_pieces() {
  for (PendingStep& u : pending_) {
    const Param& p = *u.p;
    const SymSlice slice = u.zero ? zero_slice(p, u.x) : slice_of(u.x, p.full, p.spec);
    const std::string logical = grad(p.logical) + ".clipped";
    std::string out = norm_tensor(u.x, at_rank(u.x, grad(p.local) + ".clipped"), logical, slice);
    // The coefficient on u's rank (clip_coefficient's name there).
    g.op(at_rank(u.x, grad(p.local) + ".clip"), "mul", {u.g, at_rank(u.x, "clip.coef")}, {out});
    u.g = out;
  }
}

void Builder::clip_gradients() {
  if (sym()) return clip_gradients_compact();
  // Every rank's own contributions, per total (dense, expert).
  std::map<std::pair<bool, int>, std::vector<std::string>> terms;
  std::map<int, Coord> where;
  for (int p = 0; p < s.pp; ++p)
    for (const Coord& x : devices(p)) where[rank(x)] = x;
  for (const PendingStep& u : pending_)
    if (norm_counts(u))
      terms[{s.moe() && expert_piece(u.p->spec), rank(u.x)}].push_back(piece_sum_of_squares(u));

  // The totals, all-reduced over the ranks whose pieces differ.
  auto total = [&](bool expert, const std::string& logical) {
    const std::string name = "clip." + std::string(expert ? "expert" : "dense");
    std::map<int, std::string> reduced;  // rank -> claimed total
    for (const auto& [r, x] : where) {
      if (s.logical) {
        g.tensor(x, logical, {}, std::nullopt, "f32");
        sum_terms(x, name, terms[{expert, r}], logical);
        reduced[r] = logical;
        continue;
      }
      const std::string local = at_rank(x, name + ".local");
      g.tensor(x, local, {}, std::nullopt, "f32");
      sum_terms(x, name, terms[{expert, r}], local);
    }
    if (s.logical) return reduced;
    for (const auto& [r, x] : where) {
      const std::vector<int> group = norm_group(x, expert);
      if (group.front() != r) continue;
      std::vector<std::string> in, out;
      for (int member : group) {
        const Coord& y = where.at(member);
        in.push_back(at_rank(y, name + ".local"));
        out.push_back(at_rank(y, name + ".total"));
        declare(y, out.back(), logical, {});
        reduced[member] = out.back();
      }
      const bool solo = !expert && s.bug("clip-norm-local-shard");
      if (solo)
        for (size_t k = 0; k < group.size(); ++k)
          collective(at_rank(where.at(group[k]), name + ".norm_all_reduce.solo"), "all_reduce",
                     {in[k]}, {out[k]}, {group[k]});
      else
        collective(at_rank(x, name + ".norm_all_reduce"), "all_reduce", in, out, group);
    }
    return reduced;
  };
  std::map<int, std::string> dense = total(false, s.moe() ? "clip.dense.ss" : "clip.ss");
  std::map<int, std::string> expert;
  if (s.moe()) expert = total(true, "clip.expert.ss");

  // The clip coefficient on every rank, from the replicated total.
  for (const auto& [r, x] : where) {
    std::string ss = dense.at(r);
    if (s.moe()) {
      ss = norm_tensor(x, at_rank(x, "clip.ss"), "clip.ss", {});
      g.op(at_rank(x, "clip.ss.add"), "add", {dense.at(r), expert.at(r)}, {ss});
    }
    clip_coefficient(x, ss);
  }
  clip_pieces();
}

// The axes along which norm_group's members differ, in mesh order (one rule
// for both forms: the group of the rank at coordinate 0, read off its members).
std::vector<std::string> Builder::norm_axes(bool expert) const {
  std::set<std::string> vary;
  for (int r : norm_group(Coord{}, expert))
    for (const std::string& axis : mesh().nonzero_axes(r)) vary.insert(axis);
  std::vector<std::string> axes;
  for (const auto& [axis, size] : mesh().axes())
    if (vary.count(axis)) axes.push_back(axis);
  return axes;
}

// The compact form writes what clip_gradients writes rank by rank: each
// stage's program sums its pieces (two chains where tp rank 0 alone counts
// the pieces replicated over tp), and a program on every stage all-reduces
// the totals over the axes along which the pieces differ (pp among them, so
// the group spans the stages) and computes the coefficient each piece is
// then multiplied by in its stage's program.
void Builder::clip_gradients_compact() {
  // Per (expert, stage): each counted piece's sum of squares, and whether tp
  // rank 0 alone counts it.
  std::map<std::pair<bool, int>, std::vector<std::pair<std::string, bool>>> terms;
  for (const PendingStep& u : pending_) {
    const NormShare share = norm_share(u);
    if (share == NormShare::None) continue;
    if (share == NormShare::FirstKvReplica)
      throw std::logic_error("transformer planner: the compact form has no kv replicas");
    const bool first_tp = share == NormShare::FirstTp && s.tp > 1;
    Graph::When only(g, first_tp ? mesh().tp0() : "");
    terms[{s.moe() && expert_piece(u.p->spec), u.x.p}].push_back(
        {piece_sum_of_squares(u), first_tp});
  }
  Coord every = devices(0).front();
  every.p = kEveryStage;

  auto total = [&](bool expert, const std::string& logical) {
    const std::string name = "clip." + std::string(expert ? "expert" : "dense");
    for (int p = 0; p < s.pp; ++p) {
      const Coord x = devices(p).front();
      std::vector<std::string> all, shared;
      for (const auto& [ss, first_tp] : terms[{expert, p}]) {
        all.push_back(ss);
        if (!first_tp) shared.push_back(ss);
      }
      const std::string local = at_rank(x, name + ".local");
      auto chain = [&](const std::vector<std::string>& t) {
        g.tensor(x, local, {}, std::nullopt, "f32");
        sum_terms(x, name, t, local);
      };
      if (all.size() == shared.size()) {
        chain(all);
        continue;
      }
      {
        Graph::When first(g, mesh().tp0());
        chain(all);
      }
      for (const std::string& rest : mesh().tp_rest()) {
        Graph::When others(g, rest);
        chain(shared);
      }
    }
    const std::vector<std::string> axes = norm_axes(expert);
    const std::string in = at_rank(every, name + ".local"), out = at_rank(every, name + ".total");
    declare(every, out, logical, {});
    if (!expert && s.bug("clip-norm-local-shard")) {
      collective(at_rank(every, name + ".norm_all_reduce.solo"), "all_reduce", {in}, {out},
                 solo_group(every));
      return out;
    }
    // Named at the group's first member: 0 along each axis of the group.
    const Coord first = mesh().zeroed(every, axes);
    collective(at_rank(first, name + ".norm_all_reduce"), "all_reduce", {in}, {out},
               Group::along(axes));
    return out;
  };
  std::string ss = total(false, clip_total(s));
  if (s.moe()) {
    const std::string dense = ss, expert = total(true, "clip.expert.ss");
    ss = norm_tensor(every, at_rank(every, "clip.ss"), "clip.ss", {});
    g.op(at_rank(every, "clip.ss.add"), "add", {dense, expert}, {ss});
  }
  clip_coefficient(every, ss);
  clip_pieces();
}

}  // namespace shardproof::planner::transformer
