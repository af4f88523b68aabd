// Forward pass of an MoE layer (replacing the SwiGLU MLP from first_dense on)
// for one micro-batch on every dp and tp rank of its stage.
//
// Routing is static: routing groups are sequences, and the input
// `l{i}.moe.dispatch` [B, S, E, C] says which slot c of expert e token s of
// sequence b fills (0/1; the proof holds for any values). The router's
// softmax only weighs the experts' outputs:
//   n      = rmsnorm(h)                        [B, S, H]
//   probs  = softmax(n @ wr)                   [B, S, E]
//   cw     = dispatch * probs[..., None]       [B, S, E, C]  combine weights
//   xin    = dispatch^T @ n  (per sequence)    [B, E, C, H]  token slots
//   out    = swiglu_e(xin)  (per expert)       [B, E, C, H]
//   y      = cw @ out       (per sequence)     [B, S, H]
//   mlp    = y + shared_swiglu(n);  x{i+1} = h + mlp
// Parallel: every tp rank routes (the router is replicated); with ep >= 2
// the slots go to their expert's owner by an all_to_all over the ep group
// (ep consecutive dp ranks; split on experts, concatenated on sequences: the
// owner gets the slots of every sequence of the group's micro-batch,
// contiguous because Ax::Batch is micro-batch major) and come back by the
// inverse one. The experts' ffn is
// split over tp (expert tensor parallelism): the down projection's partial
// sums are all-reduced over tp. The shared expert is a Megatron MLP.
// Sequence and context parallelism (routing groups are whole sequences):
// the normed tokens are all-gathered over tp (sp) and cp into whole
// sequences, routed and combined on every tp and cp rank alike, and each
// rank keeps its own piece of the combined output (moe_seq.cpp); the shared
// expert runs on the cp chunk like the dense MLP.
#include <algorithm>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kRow = {Ax::Batch, Ax::Full, Ax::Full};
const Spec kSlots = {Ax::Batch, Ax::Full, Ax::Full, Ax::Full};

}  // namespace

void Builder::declare_moe_params(int i) {
  const std::string l = layer(i) + ".moe";
  const int p = s.stage_of(i);
  add_param(l + ".wr", {s.H, s.E}, {Ax::Full, Ax::Full}, p);
  add_param(l + ".wg", {s.E, s.H, s.FE}, {Ax::Expert, Ax::Full, Ax::Etp}, p);
  add_param(l + ".wu", {s.E, s.H, s.FE}, {Ax::Expert, Ax::Full, Ax::Etp}, p);
  add_param(l + ".wd", {s.E, s.FE, s.H}, {Ax::Expert, Ax::Etp, Ax::Full}, p);
  add_param(l + ".wsg", {s.H, s.FS}, {Ax::Full, Ax::Tp}, p);
  add_param(l + ".wsu", {s.H, s.FS}, {Ax::Full, Ax::Tp}, p);
  add_param(l + ".wsd", {s.FS, s.H}, {Ax::Tp, Ax::Full}, p);
}

void Builder::moe_inputs() {
  for (int i = 0; i < s.L; ++i) {
    if (!s.moe_layer(i)) continue;
    for (Coord x : devices(s.stage_of(i)))
      for (const Ix& m : microbatches()) {
        x.m = m;
        add_input(act(x, layer(i) + ".moe.dispatch", {s.B, s.S, s.E, s.C}, kSlots));
      }
  }
}

Spec Builder::expert_spec(Ax last) const {
  // etp < tp at ep 1: the rank's token split (MbBatch's formula gives it).
  return {s.ep > 1 || s.etp_split() ? Ax::MbBatch : Ax::Batch, Ax::Expert, Ax::Full, last};
}

std::string Builder::expert_side(const Coord& x, const std::string& name) const {
  return s.ep > 1 ? at(x, name) + ".ep" : split_side(x, name);
}

std::string Builder::token_side(const Coord& x, const std::string& name) const {
  if (s.etp_split()) return at(x, name) + ".tok";  // gathered over the splits
  return s.ep > 1 ? at(x, name) + ".back" : at(x, name);
}

void Builder::moe_all_to_all(Coord x0, const std::string& name, bool to_experts) {
  if (s.ep == 1) return;
  if (sym()) {
    // One template: the ep group (its axes) named at its first member.
    Coord x = devices(x0.p).front();
    x.m = x0.m;
    return all_to_all_group(mesh().zeroed(x, mesh().ep_axes()), name, to_experts);
  }
  if (s.etp_split()) {
    // The ep groups of the expert mesh, one per etp rank (and cp rank, as
    // at etp = tp).
    for (const Ix& lead : ep_leaders())
      each_cp(x0, [&](Coord xg) {
        for (int k = 0; k < s.etp; ++k) {
          xg.t = k;
          all_to_all_group(expert_coord(xg, lead), name, to_experts);
        }
      });
    return;
  }
  for (const Ix& lead : ep_leaders())
    each_cp_tp(x0, [&](Coord xg) {
      xg.d = lead;
      all_to_all_group(xg, name, to_experts);
    });
}

// One all_to_all over the ep group xg leads (tp rank xg.t).
void Builder::all_to_all_group(const Coord& xg, const std::string& name, bool to_experts) {
  const Shape full = {s.B, s.E, s.C, s.H};
  std::vector<std::string> in, out;
  // Under etp < tp the tokens side is the rank's split.
  const Spec tokens = s.etp_split() ? Spec{Ax::EtpBatch, Ax::Full, Ax::Full, Ax::Full} : kSlots;
  each_ep(xg, [&](const Coord& x) {
    in.push_back(to_experts ? split_side(x, name) : at(x, name));
    out.push_back(to_experts ? claim(x, expert_side(x, name), name, full, expert_spec(Ax::Full))
                             : claim(x, returned_side(x, name), name, full, tokens));
  });
  Group group = ep_group(xg);
  // To the owners: expert blocks out, sequences in; back: the reverse.
  nlohmann::json attrs = {{"split_dim", to_experts ? 1 : 0}, {"concat_dim", to_experts ? 0 : 1}};
  const std::string op_name = at(xg, name + (to_experts ? ".ep_dispatch" : ".ep_combine"));
  // Reverse order (v1 only: the compact form refuses the bug).
  if (!to_experts && moe_fires("all-to-all-wrong-order", -1, xg) && xg.t == 0 &&
      name == layer(s.moe_bug_layer()) + ".moe.out") {
    // Group listed in reverse: rank r gets the pieces meant for rank
    // ep-1-r of its group, concatenated in reverse expert order.
    std::reverse(in.begin(), in.end());
    std::reverse(out.begin(), out.end());
    std::reverse(group.ranks.begin(), group.ranks.end());
  }
  const bool swapped = to_experts && name == layer(s.moe_bug_layer()) + ".moe.xin";
  BugSite site = swapped ? moe_site("all-to-all-dims-swapped", -1, xg) : BugSite{};
  if (site.fires) site = site_at(xg, 0, true);  // and on tp rank 0 only
  branch(site, [&](bool buggy) {
    if (!buggy) return collective(op_name, "all_to_all", in, out, group, attrs);
    // Split on sequences and concatenated on experts, into a buffer then
    // viewed with the expected shape.
    auto index = [&](const Coord& x) {
      return sym() ? size_t(0) : size_t(expert_dp(x) - expert_dp(xg));
    };
    std::vector<std::string> wrong;
    each_ep(xg, [&](const Coord& x) {
      Shape w = g.shape(in[index(x)]);
      w[0] /= s.ep;
      w[1] *= s.ep;
      wrong.push_back(scratch(x, name + ".ep_swapped", w));
    });
    collective(op_name, "all_to_all", in, wrong, group, {{"split_dim", 0}, {"concat_dim", 1}});
    each_ep(xg, [&](const Coord& x) {
      const size_t k = index(x);
      op(x, name + ".ep_view", "reshape", {wrong[k]}, {out[k]}, {{"shape", g.shape(out[k])}});
    });
  });
}

void Builder::moe_forward(int i, Coord x0) {
  const std::string l = layer(i), m = l + ".moe";
  const Shape hs = {s.B, s.S, s.H}, slots = {s.B, s.E, s.C, s.H};
  const Shape flat = {s.B, s.E * s.C, s.H}, mask = {s.B, s.S, s.E, s.C};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  // Every dp, cp and tp rank of the stage.
  auto each_rank = [&](const std::function<void(const Coord&)>& f) {
    each_dp(x0, [&](const Coord& x) { each_cp_tp(x, f); });
  };

  // Router, combine weights and the token slots, on the tokens' rank.
  each_rank([&](const Coord& x) {
    rmsnorm_forward(x, l + ".mn", at(x, l + ".h"), weight(x, l + ".mn.w"), hs, resid_spec);
  });
  each_dp(x0, [&](const Coord& x) { gather_moe_tokens(x, l + ".mn.out"); });
  each_rank([&](const Coord& x) {
    const std::string n = moe_tokens(x, l + ".mn.out");
    std::string logits = act(x, m + ".logits", {s.B, s.S, s.E}, kRow);
    op(x, m + ".logits", "matmul", {n, weight(x, m + ".wr")}, {logits});
    std::string probs = act(x, m + ".probs", {s.B, s.S, s.E}, kRow);
    op(x, m + ".softmax", "softmax", {logits}, {probs}, {{"dim", -1}});
    std::string probs4 = act(x, m + ".probs4", {s.B, s.S, s.E, 1}, kSlots);
    op(x, m + ".probs4", "reshape", {probs}, {probs4}, {{"shape", g.shape(probs4)}});
    const std::string disp = at(x, m + ".dispatch");
    std::string cw = act(x, m + ".cw", mask, kSlots);
    op(x, m + ".cw", "mul", {disp, probs4}, {cw});
    std::string disp2 = act(x, m + ".dispatch.flat", {s.B, s.S, s.E * s.C}, kRow);
    op(x, m + ".dispatch.flat", "reshape", {disp}, {disp2}, {{"shape", g.shape(disp2)}});
    std::string xin2 = act(x, m + ".xin.flat", flat, kRow);
    dispatch_tokens(x, i, disp2, n, xin2);
    std::string xin = act(x, m + ".xin", slots, kSlots);
    op(x, m + ".xin", "reshape", {xin2}, {xin}, {{"shape", g.shape(xin)}});
  });
  split_tokens(x0, i, m + ".xin");
  moe_all_to_all(x0, m + ".xin", true);

  // The experts, on their owner: SwiGLU over each expert's slots, the ffn
  // split over tp.
  const Shape ffn = {s.B, s.E, s.C, s.FE};
  each_rank([&](const Coord& x) {
    const std::string xin = expert_side(x, m + ".xin");
    std::string gate = act(x, m + ".gate", ffn, expert_spec(Ax::Etp));
    op(x, m + ".gate", "matmul", {xin, weight(x, m + ".wg")}, {gate});
    std::string up = act(x, m + ".up", ffn, expert_spec(Ax::Etp));
    op(x, m + ".up", "matmul", {xin, weight(x, m + ".wu")}, {up});
    std::string a = act(x, m + ".act", ffn, expert_spec(Ax::Etp));
    op(x, m + ".silu", "silu", {gate}, {a});
    std::string mid = act(x, m + ".mid", ffn, expert_spec(Ax::Etp));
    op(x, m + ".mid", "mul", {a, up}, {mid});
  });
  expert_sum(x0, m + ".out", [&](const Coord& xt, const std::string& out) {
    op(xt, m + ".down", "matmul", {at(xt, m + ".mid"), weight(xt, m + ".wd")}, {out});
  });
  moe_all_to_all(x0, m + ".out", false);
  gather_splits(x0, m + ".out");

  // Shared expert (Megatron MLP) and the combine, on the tokens' rank.
  const Shape sffn = {s.B, s.S, s.FS};
  const Spec sspec = {Ax::Batch, Ax::Seq, Ax::Tp};
  each_rank([&](const Coord& x) {
    const std::string n = gather_seq(x, l + ".mn.out", hs, resid_spec, 1);
    std::string gate = act(x, m + ".sgate", sffn, sspec);
    op(x, m + ".sgate", "matmul", {n, weight(x, m + ".wsg")}, {gate});
    std::string up = act(x, m + ".sup", sffn, sspec);
    op(x, m + ".sup", "matmul", {n, weight(x, m + ".wsu")}, {up});
    std::string a = act(x, m + ".sact", sffn, sspec);
    op(x, m + ".ssilu", "silu", {gate}, {a});
    std::string mid = act(x, m + ".smid", sffn, sspec);
    op(x, m + ".smid", "mul", {a, up}, {mid});

    std::string out2 = act(x, m + ".out.flat", flat, kRow);
    op(x, m + ".out.flat", "reshape", {token_side(x, m + ".out")}, {out2},
       {{"shape", g.shape(out2)}});
    std::string cw2 = act(x, m + ".cw.flat", {s.B, s.S, s.E * s.C}, kRow);
    op(x, m + ".cw.flat", "reshape", {at(x, m + ".cw")}, {cw2}, {{"shape", g.shape(cw2)}});
    std::string y = act(x, m + ".y", hs, kRow);
    op(x, m + ".combine", "matmul", {cw2, out2}, {y});
  });
  each_dp_cp(x0, [&](const Coord& x) {
    tp_sum(x, m + ".shared", hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, m + ".shared",
           [&](const Coord& xt, const std::string& out) {
             op(xt, m + ".sdown", "matmul", {at(xt, m + ".smid"), weight(xt, m + ".wsd")}, {out});
           });
  });
  each_rank([&](const Coord& x) {
    std::string sum = act(x, l + ".mlp", hs, resid_spec);
    const std::string shared = at(x, m + ".shared");
    const std::string y = own_tokens(x, i, m + ".y");
    branch(moe_site("moe-combine-missing-shared", i, x), [&](bool buggy) {
      if (!buggy) return op(x, m + ".sum", "add", {y, shared}, {sum});
      // Masked out rather than left out, so the stage still reads the
      // claimed shared output and its logical side stops there.
      std::string dropped = scratch(x, m + ".shared.dropped", g.shape(shared));
      op(x, m + ".shared.drop", "scale", {shared}, {dropped}, {{"factor", 0}});
      op(x, m + ".sum", "add", {y, dropped}, {sum});
    });
    std::string next = resid_out(x, i + 1);
    op(x, l + ".mlp.residual", "add", {at(x, l + ".h"), sum}, {next});
  });
  each_dp(x0, [&](const Coord& x) { reshard_resid(x, i + 1); });
}

}  // namespace shardproof::planner::transformer
