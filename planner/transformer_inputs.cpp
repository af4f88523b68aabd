// The step's inputs: every parameter piece a rank holds, the data of each
// micro-batch, and the rotary tables and causal mask.
#include <algorithm>
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

void Builder::add_param(const std::string& logical, const Shape& full, const Spec& spec, int stage,
                        const std::string& local) {
  params_.push_back({logical, logical, full, spec, local.empty() ? logical : local, stage});
}

const Builder::Param& Builder::param(const std::string& local) const {
  for (const Param& p : params_)
    if (p.local == local) return p;
  throw std::logic_error("transformer planner: no parameter piece " + local);
}

void Builder::declare_params() {
  const int64_t H = s.H, Q = s.NH * s.D, K = s.NKV * s.D;
  for (int i = 0; i < s.L; ++i) {
    const std::string l = layer(i);
    const int p = s.stage_of(i);
    add_param(l + ".an.w", {H}, {Ax::Full}, p);
    add_param(l + ".wq", {H, Q}, {Ax::Full, Ax::Tp}, p);
    add_param(l + ".wk", {H, K}, {Ax::Full, Ax::Kv}, p);
    add_param(l + ".wv", {H, K}, {Ax::Full, Ax::Kv}, p);
    add_param(l + ".wo", {Q, H}, {Ax::Tp, Ax::Full}, p);
    if (s.c.bias) add_param(l + ".bo", {H}, {Ax::Full}, p);
    add_param(l + ".mn.w", {H}, {Ax::Full}, p);
    if (s.moe_layer(i)) {
      declare_moe_params(i);
      continue;
    }
    const Shape gu = {H, 2 * s.F};
    if (s.logical) {
      add_param(l + ".wgu", gu, {Ax::Full, Ax::Full}, p);
    } else if (fires("fused-gate-up-contiguous", i, Coord{})) {
      // The fused weight cut into contiguous tp blocks, as if it were not
      // [gate | up] but already interleaved per rank.
      add_param(l + ".wgu", gu, {Ax::Full, Ax::Tp}, p, l + ".wgu.block");
    } else {
      add_param(l + ".wgu", gu, {Ax::Full, Ax::TpGate}, p, l + ".wgu.gate");
      add_param(l + ".wgu", gu, {Ax::Full, Ax::TpUp}, p, l + ".wgu.up");
    }
    add_param(l + ".wdown", {s.F, H}, {Ax::Tp, Ax::Full}, p);
  }
  if (!s.logical && s.bug("kv-heads-not-replicated"))
    for (Param& prm : params_)
      if (prm.logical == layer(s.bug_layer()) + ".wk" ||
          prm.logical == layer(s.bug_layer()) + ".wv")
        prm.spec[1] = Ax::KvModulo;
  if (!s.logical && s.bug("pp-stage-layers-swapped")) {
    // The last stage's first two layers load each other's weights.
    const std::string a = layer(s.stage_begin(s.last_stage())) + ".",
                      b = layer(s.stage_begin(s.last_stage()) + 1) + ".";
    for (Param& prm : params_) {
      if (prm.logical.rfind(a, 0) == 0)
        prm.loaded = b + prm.logical.substr(a.size());
      else if (prm.logical.rfind(b, 0) == 0)
        prm.loaded = a + prm.logical.substr(b.size());
    }
  }
  add_param("emb", {s.V, H}, {Ax::Tp, Ax::Full}, 0);
  // Tied: the last stage keeps its own copy of the table for the LM head.
  if (s.tie && s.last_stage() != 0) add_param("emb", {s.V, H}, {Ax::Tp, Ax::Full}, s.last_stage());
  add_param("final.w", {H}, {Ax::Full}, s.last_stage());
  if (!s.tie) add_param("lm", {H, s.V}, {Ax::Full, Ax::Tp}, s.last_stage());
}

bool Builder::zero3_sharded(const Param& p) const {
  return !s.logical && s.zero == 3 && (dp_replicated(p) || zero_over_edp(p));
}

// ZeRO-3: a rank holds only its dim-0 shard of piece p; the whole piece is
// all-gathered over dp x cp (an expert block over edp) before the forward
// (and kept for the backward).
void Builder::gather_param(const Param& p) {
  if (sym()) return gather_param_compact(p);
  for (const Coord& x : devices(p.stage)) {
    declare(x, at_rank(x, p.local + ".shard"), p.loaded, zero_slice(p, x));
    add_input(at_rank(x, p.local + ".shard"));
  }
  for (const Coord& x : devices(p.stage)) {
    const std::vector<Coord> members = zero_members(p, x);
    // Not the group's leader (under --etp its members' tp ranks differ).
    if (int(members[0].d) != int(x.d) || int(members[0].t) != int(x.t) || x.c != 0) continue;
    std::vector<std::string> shards, whole;
    Group group;
    for (const Coord& xd : members) {
      shards.push_back(at_rank(xd, p.local + ".shard"));
      whole.push_back(claim(xd, at_rank(xd, p.local), p.loaded, p.full, p.spec));
      group.ranks.push_back(rank(xd));
    }
    if (s.bug("zero3-param-gather-order") && p.local == layer(s.bug_layer()) + ".wq" && x.t == 0)
      reverse_members(shards, whole, group);
    collective(at_rank(x, p.local + ".zero3_all_gather"), "all_gather", shards, whole, group,
               {{"dim", 0}});
  }
}

// One template: each rank's shard, gathered over the dp x cp plane (an
// expert block's over its edp group, the dp axis of the expert mesh), named
// at the group's first member, as finish_step gathers ZeRO's updated shards.
void Builder::gather_param_compact(const Param& p) {
  const Coord x = devices(p.stage).front();
  const std::string shard = at_rank(x, p.local + ".shard");
  declare(x, shard, p.loaded, zero_slice(p, x));
  add_input(shard);
  const std::string whole = claim(x, at_rank(x, p.local), p.loaded, p.full, p.spec);
  const Group group = zero_over_edp(p) ? edp_group() : dp_cp_group(x);
  collective(at_rank(mesh().zeroed(x, group.axes), p.local + ".zero3_all_gather"), "all_gather",
             {shard}, {whole}, group, {{"dim", 0}});
}

void Builder::inputs() {
  auto input = [&](const std::string& name) { add_input(name); };
  // Pieces held whole are inputs; ZeRO-3 pieces are input as shards and
  // gathered (gather_param).
  for (const Param& prm : params_)
    for (const Coord& x : devices(prm.stage))
      if (!zero3_sharded(prm))
        input(claim(x, at_rank(x, prm.local), prm.loaded, prm.full, prm.spec));
  for (const Param& prm : params_)
    if (zero3_sharded(prm)) gather_param(prm);
  const Shape rope = {s.S, 1, s.D}, mask = {s.S, s.S};
  for (int p = 0; p < s.pp; ++p)
    for (Coord x : devices(p)) {
      if (s.stage_begin(p) < s.stage_end(p)) {
        for (const char* table : {"rope.cos", "rope.sin"})
          input(claim(x, at_rank(x, table), table, rope, {Ax::Seq, Ax::Full, Ax::Full}));
        input(claim(x, at_rank(x, "attn.mask"), "attn.mask", mask, {Ax::Seq, Ax::Full}));
      }
      for (const Ix& m : microbatches()) {
        x.m = m;
        if (p == 0) input(act(x, "tokens", {s.B, s.S}, {Ax::Batch, Ax::Seq}, {}, "i64"));
        if (p == s.last_stage())
          input(act(x, "labels", {s.B, s.S, 1}, {Ax::Batch, Ax::Seq, Ax::Full}, {}, "i64"));
      }
    }
}

}  // namespace shardproof::planner::transformer
