// Backward pass of an MoE layer (see moe_forward.cpp for the forward and the
// names), for one micro-batch on every dp and tp rank of its stage. With
// gy = d x{i+1} (= d mlp = d y = d shared):
//   d cw   = gy @ out^T,  d out = cw^T @ gy           (per sequence)
//   experts: SwiGLU backward per expert, on the owner; d xin's tp partials
//            all-reduced; weight gradients summed over sequences and slots
//   d n    = dispatch @ d xin                          (routed tokens)
//          + d logits @ wr^T                           (router)
//          + shared expert's input gradient (tp partials all-reduced)
//   d probs  = sum_c d cw * dispatch
//   d logits = probs * (d probs - sum(probs * d probs))  (softmax backward)
// then the norm backward and the residual, as in the dense layer. Under sp
// or cp (moe_seq.cpp) the routed part runs on whole sequences (gy gathered)
// and each rank keeps its piece of d n; the shared expert runs on the chunk.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kRow = {Ax::Batch, Ax::Full, Ax::Full};
const Spec kSlots = {Ax::Batch, Ax::Full, Ax::Full, Ax::Full};

}  // namespace

void Builder::expert_weight_grad(const Coord& x, const std::string& a, const std::string& b,
                                 const std::string& piece) {
  // [B, E, C, k] -> [E, B*C, k]: each expert's slots of every sequence in a row.
  auto per_expert = [&](const std::string& t, const std::string& name) {
    const Shape sh = g.shape(t);
    std::string tr = scratch(x, name, {sh[1], sh[0], sh[2], sh[3]});
    op(x, name, "transpose", {t}, {tr}, {{"perm", {1, 0, 2, 3}}});
    std::string flat = scratch(x, name + ".flat", {sh[1], sh[0] * sh[2], sh[3]});
    op(x, name + ".flat", "reshape", {tr}, {flat}, {{"shape", g.shape(flat)}});
    return flat;
  };
  // Under cp every cp rank holds every slot: each contracts its own block
  // of them (a bug: all of them).
  const bool all_slots = moe_fires("moe-cp-expert-grad-all-slots", -1, x) &&
                         piece == layer(s.moe_bug_layer()) + ".moe.wg";
  auto own = [&](const std::string& t, const std::string& name) {
    return all_slots ? t : cp_own_rows(x, t, 2, name);
  };
  const std::string a2 = per_expert(own(a, grad(piece) + ".lhs"), grad(piece) + ".lhs"),
                    b2 = per_expert(own(b, grad(piece) + ".rhs"), grad(piece) + ".rhs");
  std::string gw = grad_target(x, piece, "mb", g.shape(weight(x, piece)), {});
  op(x, grad(piece) + ".matmul", "matmul", {a2, b2}, {gw}, {{"transpose_a", true}});
}

void Builder::moe_backward(int i, Coord x0) {
  const std::string l = layer(i), m = l + ".moe";
  const Shape hs = {s.B, s.S, s.H}, slots = {s.B, s.E, s.C, s.H};
  const Shape flat = {s.B, s.E * s.C, s.H}, mask = {s.B, s.S, s.E, s.C};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  const std::string gy_name = grad(resid(i + 1));
  // Every dp, cp and tp rank of the stage.
  auto each_rank = [&](const std::function<void(const Coord&)>& f) {
    each_dp(x0, [&](const Coord& x) { each_cp_tp(x, f); });
  };
  // Tokens folded into one dimension, for weight gradients of [*, H] weights.
  auto tokens2d = [&](const Coord& x, const std::string& local, const std::string& name) {
    const Shape sh = g.shape(local);
    std::string t2 = scratch(x, name + ".2d", {sh[0] * sh[1], sh[2]});
    op(x, name + ".2d", "reshape", {local}, {t2}, {{"shape", g.shape(t2)}});
    return t2;
  };

  // Combine backward, on the tokens' rank.
  each_dp(x0, [&](const Coord& x) { gather_moe_tokens(x, gy_name); });
  each_rank([&](const Coord& x) {
    const std::string gy = moe_tokens(x, gy_name);
    std::string g_cw2 = act(x, grad(m + ".cw.flat"), {s.B, s.S, s.E * s.C}, kRow);
    op(x, grad(m + ".cw.flat"), "matmul", {gy, at(x, m + ".out.flat")}, {g_cw2},
       {{"transpose_b", true}});
    std::string g_cw = act(x, grad(m + ".cw"), mask, kSlots);
    op(x, grad(m + ".cw"), "reshape", {g_cw2}, {g_cw}, {{"shape", g.shape(g_cw)}});
    std::string g_out2 = act(x, grad(m + ".out.flat"), flat, kRow);
    op(x, grad(m + ".out.flat"), "matmul", {at(x, m + ".cw.flat"), gy}, {g_out2},
       {{"transpose_a", true}});
    std::string g_out = act(x, grad(m + ".out"), slots, kSlots);
    op(x, grad(m + ".out"), "reshape", {g_out2}, {g_out}, {{"shape", g.shape(g_out)}});
  });
  split_tokens(x0, i, grad(m + ".out"));
  moe_all_to_all(x0, grad(m + ".out"), true);

  // Experts backward, on the owner.
  const Shape ffn = {s.B, s.E, s.C, s.FE};
  each_rank([&](const Coord& x) {
    const std::string g_out = expert_side(x, grad(m + ".out"));
    std::string g_mid = act(x, grad(m + ".mid"), ffn, expert_spec(Ax::Etp));
    op(x, grad(m + ".mid"), "matmul", {g_out, weight(x, m + ".wd")}, {g_mid},
       {{"transpose_b", true}});
    expert_weight_grad(x, at(x, m + ".mid"), g_out, m + ".wd");
    std::string g_act = act(x, grad(m + ".act"), ffn, expert_spec(Ax::Etp));
    op(x, grad(m + ".act"), "mul", {g_mid, at(x, m + ".up")}, {g_act});
    std::string g_up = act(x, grad(m + ".up"), ffn, expert_spec(Ax::Etp));
    op(x, grad(m + ".up"), "mul", {g_mid, at(x, m + ".act")}, {g_up});
    std::string dsilu = act(x, m + ".dsilu", ffn, expert_spec(Ax::Etp));
    op(x, m + ".dsilu", "map", {at(x, m + ".gate")}, {dsilu}, {{"fn", "silu'"}});
    std::string g_gate = act(x, grad(m + ".gate"), ffn, expert_spec(Ax::Etp));
    op(x, grad(m + ".gate"), "mul", {g_act, dsilu}, {g_gate});
    const std::string xin = expert_side(x, m + ".xin");
    expert_weight_grad(x, xin, g_gate, m + ".wg");
    expert_weight_grad(x, xin, g_up, m + ".wu");
  });
  expert_sum(x0, grad(m + ".xin"), [&](const Coord& xt, const std::string& out) {
    const std::string gx = grad(m + ".xin");
    std::string a = scratch(xt, gx + ".gate", g.shape(out));
    op(xt, gx + ".gate", "matmul", {at(xt, grad(m + ".gate")), weight(xt, m + ".wg")}, {a},
       {{"transpose_b", true}});
    std::string b = scratch(xt, gx + ".up", g.shape(out));
    op(xt, gx + ".up", "matmul", {at(xt, grad(m + ".up")), weight(xt, m + ".wu")}, {b},
       {{"transpose_b", true}});
    op(xt, gx + ".add", "add", {a, b}, {out});
  });
  moe_all_to_all(x0, grad(m + ".xin"), false);
  gather_splits(x0, grad(m + ".xin"));

  // Dispatch and router backward, and the shared expert, on the tokens' rank.
  const Shape sffn = {s.B, s.S, s.FS};
  const Spec sspec = {Ax::Batch, Ax::Seq, Ax::Tp};
  const Shape probs_full = {s.B, s.S, s.E};
  each_rank([&](const Coord& x) {
    const std::string n = moe_tokens(x, l + ".mn.out");
    std::string g_xin2 = act(x, grad(m + ".xin.flat"), flat, kRow);
    op(x, grad(m + ".xin.flat"), "reshape", {token_side(x, grad(m + ".xin"))}, {g_xin2},
       {{"shape", g.shape(g_xin2)}});
    std::string routed = act(x, grad(m + ".n.routed"), hs, kRow);
    op(x, grad(m + ".n.routed"), "matmul", {at(x, m + ".dispatch.flat"), g_xin2}, {routed});

    std::string terms = act(x, grad(m + ".probs4.terms"), mask, kSlots);
    op(x, grad(m + ".probs4.terms"), "mul", {at(x, grad(m + ".cw")), at(x, m + ".dispatch")},
       {terms});
    std::string g_probs = act(x, grad(m + ".probs"), probs_full, kRow);
    op(x, grad(m + ".probs"), "sum", {terms}, {g_probs}, {{"dims", {3}}});
    const std::string probs = at(x, m + ".probs");
    std::string pg = act(x, grad(m + ".softmax.pg"), probs_full, kRow);
    op(x, grad(m + ".softmax.pg"), "mul", {probs, g_probs}, {pg});
    std::string spg = act(x, grad(m + ".softmax.sum"), {s.B, s.S, 1}, kRow);
    op(x, grad(m + ".softmax.sum"), "sum", {pg}, {spg}, {{"dims", {-1}}, {"keepdim", true}});
    std::string diff = act(x, grad(m + ".softmax.diff"), probs_full, kRow);
    op(x, grad(m + ".softmax.diff"), "sub", {g_probs, spg}, {diff});
    std::string g_logits = act(x, grad(m + ".logits"), probs_full, kRow);
    op(x, grad(m + ".logits"), "mul", {probs, diff}, {g_logits});
    // Router and shared expert gradients contract the tokens of the rank's
    // micro-batch (rows of n2; under cp, of its chunk): partial sums over a
    // block of rows.
    const std::string n2 =
        tokens2d(x, gather_seq(x, l + ".mn.out", hs, resid_spec, 1), l + ".mn.out");
    const Shape tokens = {g.shape(n2)[0]};
    const std::string g_logits_own = cp_own_rows(x, g_logits, 1, grad(m + ".logits"));
    std::string gwr = grad_target(x, m + ".wr", "mb", {s.H, s.E}, tokens);
    op(x, grad(m + ".wr") + ".matmul", "matmul",
       {n2, tokens2d(x, g_logits_own, grad(m + ".logits"))}, {gwr}, {{"transpose_a", true}});
    std::string router = act(x, grad(m + ".n.router"), hs, kRow);
    op(x, grad(m + ".n.router"), "matmul", {g_logits, weight(x, m + ".wr")}, {router},
       {{"transpose_b", true}});
    std::string experts = act(x, grad(m + ".n.experts"), hs, kRow);
    op(x, grad(m + ".n.experts"), "add", {routed, router}, {experts});

    // Shared expert: the dense MLP's backward on its own weights.
    const std::string gy = gather_seq(x, gy_name, hs, resid_spec, 1);
    std::string g_smid = act(x, grad(m + ".smid"), sffn, sspec);
    op(x, grad(m + ".smid"), "matmul", {gy, weight(x, m + ".wsd")}, {g_smid},
       {{"transpose_b", true}});
    std::string gwsd = grad_target(x, m + ".wsd", "mb", g.shape(weight(x, m + ".wsd")), tokens);
    op(x, grad(m + ".wsd") + ".matmul", "matmul",
       {tokens2d(x, at(x, m + ".smid"), m + ".smid"), tokens2d(x, gy, gy_name)}, {gwsd},
       {{"transpose_a", true}});
    std::string g_sact = act(x, grad(m + ".sact"), sffn, sspec);
    op(x, grad(m + ".sact"), "mul", {g_smid, at(x, m + ".sup")}, {g_sact});
    std::string g_sup = act(x, grad(m + ".sup"), sffn, sspec);
    op(x, grad(m + ".sup"), "mul", {g_smid, at(x, m + ".sact")}, {g_sup});
    std::string dsilu = act(x, m + ".sdsilu", sffn, sspec);
    op(x, m + ".sdsilu", "map", {at(x, m + ".sgate")}, {dsilu}, {{"fn", "silu'"}});
    std::string g_sgate = act(x, grad(m + ".sgate"), sffn, sspec);
    op(x, grad(m + ".sgate"), "mul", {g_sact, dsilu}, {g_sgate});
    for (const char* w : {"sgate", "sup"}) {
      const std::string piece = m + (w == std::string("sgate") ? ".wsg" : ".wsu");
      std::string gw = grad_target(x, piece, "mb", g.shape(weight(x, piece)), tokens);
      const std::string gt = grad(m + "." + w);
      op(x, grad(piece) + ".matmul", "matmul", {n2, tokens2d(x, at(x, gt), gt)}, {gw},
         {{"transpose_a", true}});
    }
  });
  each_dp_cp(x0, [&](const Coord& x) {
    tp_sum(x, grad(m + ".n.shared"), hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, grad(m + ".n.shared"),
           [&](const Coord& xt, const std::string& out) {
             const std::string gn = grad(m + ".n.shared");
             std::string a = scratch(xt, gn + ".gate", g.shape(out));
             op(xt, gn + ".gate", "matmul", {at(xt, grad(m + ".sgate")), weight(xt, m + ".wsg")},
                {a}, {{"transpose_b", true}});
             std::string b = scratch(xt, gn + ".up", g.shape(out));
             op(xt, gn + ".up", "matmul", {at(xt, grad(m + ".sup")), weight(xt, m + ".wsu")}, {b},
                {{"transpose_b", true}});
             op(xt, gn + ".add", "add", {a, b}, {out});
           });
  });

  each_rank([&](const Coord& x) {
    std::string g_n = act(x, grad(l + ".mn.out"), hs, resid_spec);
    op(x, grad(l + ".mn.out"), "add",
       {own_tokens(x, i, grad(m + ".n.experts")), at(x, grad(m + ".n.shared"))}, {g_n});
    std::string g_norm = rmsnorm_backward(x, l + ".mn", at(x, l + ".h"), l + ".mn.w", g_n,
                                          grad(l + ".mn.in"), hs, resid_spec);
    std::string gh = act(x, grad(l + ".h"), hs, resid_spec);
    op(x, grad(l + ".h"), "add", {at(x, gy_name), g_norm}, {gh});
  });
}

}  // namespace shardproof::planner::transformer
