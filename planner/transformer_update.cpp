// Gradient accumulation over micro-batches, gradient synchronisation (the
// sequence-parallel sum of norm weights, the kv-head replicas, data and
// context parallel all-reduce or ZeRO reduce-scatter, the tied embedding's
// first/last stage sum) and the optimizer step on every parameter piece.
#include <algorithm>
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string Builder::grad_target(const Coord& x, const std::string& local, const std::string& what,
                                 const Shape& shape, const Shape& index) {
  // The logical graph has one contribution per parameter (two for a tied
  // table): it writes the gradient itself.
  const bool direct = s.logical && !(s.tie && local == "emb");
  std::string name = direct ? grad(local) : at(x, grad(local) + "." + what);
  grad_index_[{grad_key(x), local}] = index;
  declare_partial(x, param(local), name, shape, false);
  grads_[{grad_key(x), local}].push_back(name);
  grad_whats_[{grad_key(x), local}].push_back(grad(local) + "." + what);
  return name;
}

nlohmann::json Builder::optimizer_attrs() const {
  if (!s.adam()) return {{"lr", "1/100"}};
  return {{"lr", "3/10000"},      {"beta1", "9/10"}, {"beta2", "19/20"},
          {"eps", "1/100000000"}, {"step", 1},       {"weight_decay", "1/10"}};
}

void Builder::update_params() {
  // Pieces of the tied table live on two stages and are finished together.
  std::vector<const Param*> tied;
  for (const Param& prm : params_) {
    if (sym()) {
      update_piece_compact(prm);
      continue;
    }
    if (s.tie && prm.logical == "emb") {
      tied.push_back(&prm);
      continue;
    }
    update_piece({&prm});
  }
  if (!tied.empty()) update_piece(tied);
  finish_updates();
}

// Reduces the gradient of one parameter piece (or the tied table's pieces on
// the first and last stage) on every rank holding it, then steps it.
void Builder::update_piece(const std::vector<const Param*>& pieces) {
  const Param& prm = *pieces.front();
  const bool norm = prm.full.size() == 1;
  const bool kv = !s.logical && s.kv_replicas() > 1 && prm.spec.size() == 2 &&
                  (prm.spec[0] == Ax::Kv || prm.spec[1] == Ax::Kv);
  const int n_dp = s.dp * s.cp;
  const bool sync_sp = !s.logical && s.sp && norm;
  // Over dp x cp, or an expert block over its edp group (ZeRO shards it there).
  const bool sync_dp = (n_dp > 1 && dp_replicated(prm)) || edp_replicated(prm);
  const bool zero = s.zero > 0 && ((n_dp > 1 && dp_replicated(prm)) || zero_over_edp(prm));
  const bool sync_tie = pieces.size() == 2;

  // Current gradient tensor per (piece index, rank).
  std::map<std::pair<int, int>, std::string> cur;
  auto coords = [&](const Param& p) { return devices(p.stage); };
  // The tensor a sync step writes: claimed when it is the step's last one.
  auto output = [&](const Param& p, int idx, const Coord& x, const std::string& tag, bool last,
                    const Shape& shape) {
    const std::string local = at_rank(x, grad(p.local) + "." + tag);
    if (!last) {
      g.tensor(x, local, shape, std::nullopt, "f32");
      return local;
    }
    SymSlice slice = zero ? zero_slice(p, x) : slice_of(x, p.full, p.spec);
    Part part = sync_tie ? Part{idx, 2} : Part{};
    if (s.logical) return claim(x, local, grad(p.logical), p.full, p.spec);
    declare(x, local, grad(p.logical), slice, part);
    return local;
  };

  for (size_t idx = 0; idx < pieces.size(); ++idx) {
    const Param& p = *pieces[idx];
    rewrite_terms(p);
    for (const Coord& x : coords(p)) {
      const std::vector<std::string>& terms = grads_[{grad_key(x), p.local}];
      if (terms.empty()) throw std::logic_error("transformer planner: no gradient for " + p.local);
      const Shape shape = g.shape(terms[0]);
      const bool last = !sync_sp && !kv && !sync_dp && !sync_tie;
      std::string acc = terms[0];
      if (terms.size() == 1 && last && !s.logical) {
        // Claim it through an explicit copy-free sum: add nothing, keep acc.
        acc = output(p, int(idx), x, "acc", true, shape);
        g.op(at_rank(x, grad(p.local) + ".acc"), "scale", {terms[0]}, {acc}, {{"factor", 1}});
      }
      for (size_t k = 1; k < terms.size(); ++k) {
        const bool final_add = last && k + 1 == terms.size();
        std::string next;
        if (k + 1 == terms.size() && !final_add) {
          next = at_rank(x, grad(p.local) + ".acc" + str(k));
          declare_partial(x, p, next, shape, true);
        } else {
          next = output(p, int(idx), x, "acc" + str(k), final_add, shape);
        }
        accumulate(p, x, k, acc, terms[k], next);
        acc = next;
      }
      cur[{int(idx), rank(x)}] = acc;
      presync_[{p.local, rank(x)}] = acc;
    }

    // Sequence parallel: each tp rank summed only its own tokens.
    if (sync_sp)
      for (Coord x : coords(p)) {
        const std::vector<Coord> members = sp_sync_members(p, x);
        if (members.empty()) continue;  // not the first member of its group
        std::vector<std::string> in, out;
        std::vector<int> group;
        for (const Coord& xm : members) {
          in.push_back(cur[{int(idx), rank(xm)}]);
          const bool last = !kv && !sync_dp && !sync_tie;
          out.push_back(output(p, int(idx), xm, "sp", last, g.shape(in.back())));
          group.push_back(rank(xm));
        }
        if (fires("sp-norm-grad-not-reduced", -1, x) && p.local == layer(s.bug_layer()) + ".an.w")
          for (size_t k = 0; k < group.size(); ++k)
            collective(at_rank(x, grad(p.local) + ".sp_all_reduce.solo" + str(int64_t(k))),
                       "all_reduce", {in[k]}, {out[k]}, {group[k]});
        else
          collective(at_rank(x, grad(p.local) + ".sp_all_reduce"), "all_reduce", in, out, group);
        for (size_t k = 0; k < group.size(); ++k) cur[{int(idx), group[k]}] = out[k];
      }

    // kv heads replicated over tp: their gradient is split over the replicas.
    if (kv)
      for (Coord x : coords(p)) {
        const int rep = s.kv_replicas();
        if (x.t % rep != 0) continue;
        std::vector<std::string> in, out;
        std::vector<int> group;
        for (Coord xt = x; xt.t < x.t + rep; ++xt.t) {
          in.push_back(cur[{int(idx), rank(xt)}]);
          out.push_back(output(p, int(idx), xt, "kv", !sync_dp && !sync_tie, g.shape(in.back())));
          group.push_back(rank(xt));
        }
        collective(at_rank(x, grad(p.local) + ".kv_all_reduce"), "all_reduce", in, out, group);
        for (int k = 0; k < rep; ++k) cur[{int(idx), group[k]}] = out[k];
      }

    // Data (and context) parallel: sum over every replica of the piece.
    if (sync_dp && dp_sync_on_tp_group(p))
      for (Coord x : coords(p)) {
        if (x.t != 0) continue;
        std::vector<std::string> in, out;
        each_tp(x, [&](const Coord& xt) {
          in.push_back(cur[{int(idx), rank(xt)}]);
          out.push_back(output(p, int(idx), xt, "dp", !sync_tie, g.shape(in.back())));
        });
        collective(at_rank(x, grad(p.local) + ".dp_all_reduce"), "all_reduce", in, out,
                   tp_group(x));
        for (int t = 0; t < s.tp; ++t) cur[{int(idx), tp_group(x).ranks[t]}] = out[t];
      }
    else if (sync_dp)
      for (Coord x : coords(p)) {
        const std::vector<Coord> members = sync_members(p, x);
        if (members.empty()) continue;  // not the first member of its group
        std::vector<std::string> in, out;
        std::vector<int> group;
        for (const Coord& xd : members) {
          in.push_back(cur[{int(idx), rank(xd)}]);
          group.push_back(rank(xd));
          Shape shape = g.shape(in.back());
          if (zero && s.zero >= 2) shape[0] /= zero_ways(p);
          const bool last = !sync_tie && !(zero && s.zero == 1);
          out.push_back(output(p, int(idx), xd, zero ? "dp_shard" : "dp", last, shape));
        }
        dp_sync(p, x, in, out, group, zero && s.zero >= 2);
        for (size_t k = 0; k < group.size(); ++k) cur[{int(idx), group[k]}] = out[k];
      }
    // ZeRO-1: every rank has the whole sum and keeps its own shard.
    if (zero && s.zero == 1)
      for (Coord x : coords(p)) {
        std::string& g_full = cur[{int(idx), rank(x)}];
        Shape shape = g.shape(g_full);
        const int64_t j = zero_partition(p, x), len = shape[0] / zero_ways(p);
        shape[0] = len;
        std::string shard = output(p, int(idx), x, "shard", !sync_tie, shape);
        g.op(at_rank(x, grad(p.local) + ".shard"), "slice", {g_full}, {shard},
             {{"dim", 0}, {"start", j * len}, {"end", (j + 1) * len}});
        g_full = shard;
      }
  }

  // Tied embedding: the first stage's (lookup) and the last stage's (LM
  // head) gradients are summed over the embedding group.
  if (sync_tie)
    for (const Coord& x : coords(*pieces[0])) {
      Coord y = x;
      y.p = s.last_stage();
      y.d = tied_partner_dp(x);
      std::vector<std::string> in = {cur[{0, rank(x)}], cur[{1, rank(y)}]};
      std::vector<std::string> out;
      for (const Coord& z : {x, y}) {
        SymSlice slice = zero ? zero_slice(prm, z) : slice_of(z, prm.full, prm.spec);
        std::string local = at_rank(z, grad(prm.local) + ".tied");
        declare(z, local, grad(prm.logical), slice);
        out.push_back(local);
      }
      if (fires("tied-embedding-not-synced", -1, x) && x.d == 0 && x.c == 0 && x.t == 0) {
        for (int k = 0; k < 2; ++k)
          collective(at_rank(x, grad(prm.local) + ".tied_all_reduce.solo" + str(k)), "all_reduce",
                     {in[k]}, {out[k]}, {k == 0 ? rank(x) : rank(y)});
      } else {
        collective(at_rank(x, grad(prm.local) + ".tied_all_reduce"), "all_reduce", in, out,
                   {rank(x), rank(y)});
      }
      cur[{0, rank(x)}] = out[0];
      cur[{1, rank(y)}] = out[1];
    }

  // With --clip every step waits for the global norm (finish_updates);
  // without, it follows its piece's sync, as it always has.
  for (size_t idx = 0; idx < pieces.size(); ++idx)
    for (const Coord& x : coords(*pieces[idx])) {
      PendingStep u{pieces[idx], x, cur[{int(idx), rank(x)}], zero, idx == 1};
      if (s.c.clip)
        pending_.push_back(u);
      else
        step(*u.p, u.x, u.g, u.zero);
    }
}

SymSlice Builder::zero_slice(const Param& p, const Coord& x) const {
  const int n = zero_ways(p);
  SymSlice slice = slice_of(x, p.full, p.spec);
  const int64_t len = (slice[0].second - slice[0].first).value();
  if (len % n != 0)
    throw std::invalid_argument(std::string("zero: ") + (zero_over_edp(p) ? "edp" : "dp * cp") +
                                " (" + str(n) + ") must divide dim 0 (" + str(len) + ") of " +
                                p.local + "'s shard");
  const Aff j = zero_index(p, x);
  slice[0] = {slice[0].first + j * (len / n), slice[0].first + j * (len / n) + len / n};
  return slice;
}

int Builder::zero_ways(const Param& p) const {
  return zero_over_edp(p) ? s.edp() : s.dp * s.cp;
}

Aff Builder::zero_index(const Param& p, const Coord& x) const {
  // An edp group is every ep-th dp rank (zero_over_edp: cp is 1).
  if (zero_over_edp(p)) return edp_rank(x);
  return Aff(x.d) * s.cp + x.c;
}

std::vector<Coord> Builder::zero_members(const Param& p, const Coord& x) const {
  Coord x0 = x;
  x0.c = 0;
  if (!zero_over_edp(p)) {
    x0.d = 0;
    return dp_cp_members(x0);
  }
  std::vector<Coord> members;
  if (s.etp_split()) {
    // --etp below tp: the expert-dp indices with x's ep rank and etp rank.
    for (int q = expert_dp(x) % s.ep; q < s.dp * s.etp_splits(); q += s.ep)
      members.push_back(expert_coord(x0, q));
    return members;
  }
  for (x0.d = int(x.d) % s.ep; x0.d < s.dp; x0.d = Ix(int(x0.d) + s.ep)) members.push_back(x0);
  return members;
}

std::optional<std::vector<SymClaim::Over>> Builder::partial_box(const Coord& x,
                                                                const std::string& local,
                                                                bool whole_rank) const {
  if (s.logical || s.cp > 1 || s.sp || (s.tie && local == "emb")) return std::nullopt;
  const Param& p = param(local);
  for (Ax a : p.spec)
    if (a == Ax::Kv && s.kv_replicas() > 1) return std::nullopt;
  auto it = grad_index_.find({grad_key(x), local});
  if (it == grad_index_.end()) return std::nullopt;
  const Shape& index = it->second;
  if (index.empty()) return std::nullopt;
  // A micro-batch's block of slice_of (Ax::Batch); a rank's is one block
  // (rank-major rows) or, under MoE (micro-batch major rows: slice_of), its
  // micro-batches' blocks, one every dp blocks.
  std::vector<SymClaim::Over> box;
  const int64_t rows = index[0];
  if (!whole_rank)
    box.push_back({batch_block(x) * rows, batch_block(x) * rows + rows});
  else if (s.moe())
    box.push_back({Aff(x.d) * rows, Aff(x.d) * rows + rows, rows * s.dp, s.mb});
  else
    box.push_back({Aff(x.d) * (rows * s.mb), Aff(x.d) * (rows * s.mb) + rows * s.mb});
  for (size_t k = 1; k < index.size(); ++k) box.push_back({0, index[k]});
  return box;
}

void Builder::declare_partial(const Coord& x, const Param& p, const std::string& local,
                              const Shape& shape, bool whole_rank) {
  if (std::optional<std::vector<SymClaim::Over>> box = partial_box(x, p.local, whole_rank))
    g.tensor(x, local, shape, SymClaim{grad(p.logical), slice_of(x, p.full, p.spec), 0, 1, *box},
             "f32");
  else
    g.tensor(x, local, shape, std::nullopt, "f32");
}

void Builder::declare(const Coord& x, const std::string& local, const std::string& logical,
                      const SymSlice& slice, Part part) {
  g.tensor(x, local, extent(slice), SymClaim{logical, slice, part.k, part.n}, "f32");
}

void Builder::dp_sync(const Param& p, const Coord& x, const std::vector<std::string>& in,
                      const std::vector<std::string>& out, const Group& group, bool shard) {
  const std::string name = at_rank(x, grad(p.local) + ".dp");
  const auto hook = dp_sync_bug(p, x);
  branch(hook.second, [&](bool buggy) {
    const std::string bug = buggy ? hook.first : "";
    nlohmann::json attrs = {{"reduce", bug == "mean" ? "mean" : "sum"}};
    if (bug == "skip") {
      // Each member by itself, named by its place k in the group: its own
      // gradient (under ZeRO-2/3 its own shard of it).
      auto alone = [&](const Aff& k, const std::string& in_k, const std::string& out_k,
                       const Group& solo) {
        if (!shard) {
          collective(name + "_all_reduce.solo" + k.text(), "all_reduce", {in_k}, {out_k}, solo,
                     attrs);
          return;
        }
        const int64_t len = g.shape(out_k)[0];
        g.op(name + "_shard.solo" + k.text(), "slice", {in_k}, {out_k},
             {{"dim", 0}, {"start", (k * len).attr()}, {"end", (k * len + len).attr()}});
      };
      // The compact form: one template over every (dp, cp) rank, its place
      // in its group (dp x cp, or edp x cp).
      if (sym()) {
        const Coord xs = devices(x.p).front();
        const Aff d = synced_over_edp(p) ? edp_rank(xs) : Aff(xs.d);
        return alone(d * s.cp + (s.cp > 1 ? Aff(Ix::axis("cp")) : Aff(0)), in[0], out[0],
                     Group::along({}));
      }
      for (size_t k = 0; k < in.size(); ++k)
        alone(Aff(int64_t(k)), in[k], out[k], {group.ranks[k]});
      return;
    }
    std::vector<std::string> from = in;
    if (bug == "double") from = reduce_twice(p, x, in, group);
    if (shard) {
      attrs["dim"] = 0;
      collective(name + "_reduce_scatter", "reduce_scatter", from, out, group, attrs);
    } else {
      collective(name + "_all_reduce", "all_reduce", from, out, group, attrs);
    }
  });
}

// The optimizer on one rank's piece (or, under ZeRO, on its shard, then the
// shards are all-gathered so every rank holds the whole piece again).
void Builder::step(const Param& p, const Coord& x, const std::string& g_piece, bool zero) {
  SymSlice slice = slice_of(x, p.full, p.spec);
  const std::string w = weight(x, p.local);
  std::string param = w;
  if (zero && zero3_sharded(p)) {
    slice = zero_slice(p, x);
    param = at_rank(x, p.local + ".shard");  // the rank's input shard
  } else if (zero) {
    const int64_t len = (slice[0].second - slice[0].first).value() / zero_ways(p);
    const Aff j = zero_index(p, x);
    slice = zero_slice(p, x);
    param = at_rank(x, p.local + ".shard");
    declare(x, param, p.logical, slice);
    g.op(at_rank(x, p.local + ".shard"), "slice", {w}, {param},
         {{"dim", 0}, {"start", (j * len).attr()}, {"end", (j * len + len).attr()}});
  }
  auto state = [&](const std::string& suffix, const std::string& logical) {
    const std::string local = at_rank(x, p.local + suffix);
    if (s.logical) return claim(x, local, logical, p.full, p.spec);
    declare(x, local, logical, slice);
    return local;
  };
  const std::string next_name = zero ? ".next.shard" : ".next";
  if (!s.adam()) {
    std::string next = state(next_name, p.logical + ".next");
    g.op(at_rank(x, p.local + ".sgd"), "sgd", {param, g_piece}, {next}, optimizer_attrs());
    finish_step(p, x, next, zero);
    return;
  }
  std::string m = state(".m", p.logical + ".m"), v = state(".v", p.logical + ".v");
  add_input(m);
  add_input(v);
  std::string next = state(next_name, p.logical + ".next");
  std::string m_next = state(".m.next", p.logical + ".m.next");
  std::string v_next = state(".v.next", p.logical + ".v.next");
  g.op(at_rank(x, p.local + ".adam"), "adam", {param, g_piece, m, v}, {next, m_next, v_next},
       optimizer_attrs());
  add_output(m_next);
  add_output(v_next);
  finish_step(p, x, next, zero);
}

// ZeRO: gathers the updated shards into the whole piece on every rank.
void Builder::finish_step(const Param& p, const Coord& x, const std::string& next, bool zero) {
  // ZeRO-3 keeps the updated shard: the next step gathers it again.
  if (!zero || zero3_sharded(p)) {
    add_output(next);
    return;
  }
  if (sym()) {
    // One template: the shard of every dp rank, gathered over the dp axis
    // (an expert block's over its edp group: the dp axis of the expert
    // mesh), named at the group's first member.
    const std::string out =
        claim(x, at_rank(x, p.local + ".next"), p.logical + ".next", p.full, p.spec);
    add_output(out);
    const Group group = zero_over_edp(p) ? edp_group() : dp_cp_group(x);
    collective(at_rank(mesh().zeroed(x, group.axes), p.local + ".zero_all_gather"), "all_gather",
               {next}, {out}, group, {{"dim", 0}});
    return;
  }
  const std::vector<Coord> members = zero_members(p, x);
  const Coord x0 = members[0];
  // Keyed by the group's first member (its tp rank is x's but under --etp).
  std::vector<std::string>& mine = zero_shards_[{p.local, x.p, x0.t, int(x0.d)}];
  mine.push_back(next);
  if (mine.size() < members.size()) return;
  // The last shard of the group: gather them all.
  std::vector<std::string> out;
  Group group;
  for (const Coord& xd : members) {
    out.push_back(claim(xd, at_rank(xd, p.local + ".next"), p.logical + ".next", p.full, p.spec));
    add_output(out.back());
    group.ranks.push_back(rank(xd));
  }
  std::vector<std::string> shards = mine;
  if (s.bug("zero-allgather-order") && p.local == layer(s.bug_layer()) + ".wq" && x.t == 0) {
    reverse_members(shards, out, group);
  }
  collective(at_rank(x0, p.local + ".zero_all_gather"), "all_gather", shards, out, group,
             {{"dim", 0}});
}

void reverse_members(std::vector<std::string>& in, std::vector<std::string>& out, Group& group) {
  // Every input and output stays on its own rank.
  std::reverse(in.begin(), in.end());
  std::reverse(out.begin(), out.end());
  std::reverse(group.ranks.begin(), group.ranks.end());
}

void Builder::add_input(const std::string& name) {
  if (std::find(declared_inputs_.begin(), declared_inputs_.end(), name) != declared_inputs_.end())
    return;
  g.input(name);
  declared_inputs_.push_back(name);
}

void Builder::add_output(const std::string& name) {
  if (std::find(declared_outputs_.begin(), declared_outputs_.end(), name) !=
      declared_outputs_.end())
    return;
  g.output(name);
  declared_outputs_.push_back(name);
}

}  // namespace shardproof::planner::transformer
