// Grouped-query attention of one decoder layer, forward and backward, for one
// (dp rank, micro-batch) on its pipeline stage: heads split over tp (kv heads
// replicated when tp exceeds them), sequence-parallel gathers around the
// norm, context-parallel all-gather of K/V and reduce-scatter of their
// gradients.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

// 1/sqrt(D) written as the decimal a framework would print: both graphs use
// the same exact number, so its rounding does not matter.
nlohmann::json inv_sqrt(int64_t d) {
  std::ostringstream out;
  out.precision(17);
  out << 1.0 / std::sqrt(double(d));
  return nlohmann::json::parse(out.str());
}

}  // namespace

std::string Builder::expand_kv(const Coord& x, const std::string& kv_t,
                               const std::string& out_logical, int64_t seq_len) {
  const Shape in = g.shape(kv_t);  // [b, kv heads, seq, D]
  const int64_t groups = s.logical ? s.NH / s.NKV : s.local_heads() / s.local_kv_heads();
  std::string r5 = scratch(x, out_logical + ".r5", {in[0], in[1], 1, in[2], in[3]});
  op(x, out_logical + ".r5", "reshape", {kv_t}, {r5}, {{"shape", g.shape(r5)}});
  std::string e5 = scratch(x, out_logical + ".e5", {in[0], in[1], groups, in[2], in[3]});
  op(x, out_logical + ".expand", "expand", {r5}, {e5}, {{"shape", g.shape(e5)}});
  std::string out =
      act(x, out_logical, {s.B, s.NH, seq_len, s.D}, {Ax::Batch, Ax::Tp, Ax::Full, Ax::Full});
  op(x, out_logical + ".merge", "reshape", {e5}, {out}, {{"shape", g.shape(out)}});
  return out;
}

std::string Builder::reduce_kv(const Coord& x, const std::string& g_exp, const std::string& name,
                               int64_t seq_len) {
  const Shape in = g.shape(g_exp);  // [b, heads, seq, D]
  const int64_t kv = s.logical ? s.NKV : s.local_kv_heads();
  std::string r5 = scratch(x, name + ".r5", {in[0], kv, in[1] / kv, in[2], in[3]});
  op(x, name + ".r5", "reshape", {g_exp}, {r5}, {{"shape", g.shape(r5)}});
  const int rep = s.kv_replicas();
  Part part{Aff(x.c) * rep + kv_replica(x), int64_t(s.cp) * rep};
  std::string out =
      act(x, name, {s.B, s.NKV, seq_len, s.D}, {Ax::Batch, Ax::Kv, Ax::Full, Ax::Full}, part);
  op(x, name + ".sum_groups", "sum", {r5}, {out}, {{"dims", {2}}});
  return out;
}

void Builder::attention_forward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  const Shape q_full = {s.B, s.S, s.NH * s.D}, k_full = {s.B, s.S, s.NKV * s.D};
  const Shape q4 = {s.B, s.S, s.NH, s.D}, k4 = {s.B, s.S, s.NKV, s.D};
  const Spec q_spec = {Ax::Batch, Ax::Seq, Ax::Tp}, k_spec = {Ax::Batch, Ax::Seq, Ax::Kv};
  const Spec q4_spec = {Ax::Batch, Ax::Seq, Ax::Tp, Ax::Full};
  const Spec k4_spec = {Ax::Batch, Ax::Seq, Ax::Kv, Ax::Full};

  each_cp_tp(x0, [&](const Coord& x) {
    rmsnorm_forward(x, l + ".an", at(x, resid(i)), weight(x, l + ".an.w"), hs, resid_spec);
  });
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, l + ".an.out", hs, resid_spec, 1); });

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string n = gather_seq(x, l + ".an.out", hs, resid_spec, 1);
    auto project = [&](const char* w, const Shape& full, const Spec& spec, const Shape& full4,
                       const Spec& spec4) {
      std::string flat = act(x, l + "." + w, full, spec);
      op(x, l + "." + w + ".matmul", "matmul", {n, weight(x, l + ".w" + w)}, {flat});
      std::string four = act(x, l + "." + w + "4", full4, spec4);
      op(x, l + "." + w + "4", "reshape", {flat}, {four}, {{"shape", g.shape(four)}});
      return four;
    };
    std::string q = project("q", q_full, q_spec, q4, q4_spec);
    std::string k = project("k", k_full, k_spec, k4, k4_spec);
    project("v", k_full, k_spec, k4, k4_spec);
    rope(x, q, l + ".q.rope", false, q4, q4_spec);
    rope(x, k, l + ".k.rope", false, k4, k4_spec);
  });

  // Context parallelism: every rank attends to the whole sequence's K/V.
  const Spec kv_gathered = {Ax::Batch, Ax::Full, Ax::Kv, Ax::Full};
  auto kv_name = [&](const Coord& x, const std::string& t) {
    return s.cp > 1 ? at(x, t) + ".cp" : at(x, t);
  };
  if (s.cp > 1) {
    for (const std::string& t : {l + ".k.rope", l + ".v4"})
      each_tp(x0, [&](const Coord& xt) {
        std::vector<std::string> in, out;
        each_cp(xt, [&](const Coord& x) {
          in.push_back(at(x, t));
          out.push_back(claim(x, kv_name(x, t), t, k4, kv_gathered));
        });
        Coord xg = xt;  // named at the group's first member
        xg.c = 0;
        Group group = cp_group(xg);
        // Reverse order (v1 only: the compact form refuses the bug).
        if (t == l + ".k.rope" && fires("cp-kv-allgather-order", i, xg) && xg.t == 0) {
          std::reverse(in.begin(), in.end());
          std::reverse(out.begin(), out.end());
          std::reverse(group.ranks.begin(), group.ranks.end());
        }
        collective(at(xg, t + ".cp_all_gather"), "all_gather", in, out, group, {{"dim", 1}});
      });
  }

  const nlohmann::json scale = {{"factor", inv_sqrt(s.D)}};
  each_cp_tp(x0, [&](const Coord& x) {
    const Spec heads_first = {Ax::Batch, Ax::Tp, Ax::Seq, Ax::Full};
    const Spec kv_first = {Ax::Batch, Ax::Kv, Ax::Full, Ax::Full};
    const nlohmann::json swap = {{"perm", {0, 2, 1, 3}}};
    std::string qt = act(x, l + ".q.t", {s.B, s.NH, s.S, s.D}, heads_first);
    op(x, l + ".q.t", "transpose", {at(x, l + ".q.rope")}, {qt}, swap);
    std::string kt = act(x, l + ".k.t", {s.B, s.NKV, s.S, s.D}, kv_first);
    op(x, l + ".k.t", "transpose", {kv_name(x, l + ".k.rope")}, {kt}, swap);
    std::string vt = act(x, l + ".v.t", {s.B, s.NKV, s.S, s.D}, kv_first);
    op(x, l + ".v.t", "transpose", {kv_name(x, l + ".v4")}, {vt}, swap);
    std::string ke = expand_kv(x, kt, l + ".k.exp", s.S);
    std::string ve = expand_kv(x, vt, l + ".v.exp", s.S);

    const Shape sc_full = {s.B, s.NH, s.S, s.S};
    std::string scores = act(x, l + ".scores", sc_full, heads_first);
    op(x, l + ".scores", "matmul", {qt, ke}, {scores}, {{"transpose_b", true}});
    std::string scaled = act(x, l + ".scaled", sc_full, heads_first);
    op(x, l + ".scaled", "scale", {scores}, {scaled}, scale);
    std::string masked = act(x, l + ".masked", sc_full, heads_first);
    op(x, l + ".mask", "add", {scaled, weight(x, "attn.mask")}, {masked});
    std::string probs = act(x, l + ".probs", sc_full, heads_first);
    op(x, l + ".softmax", "softmax", {masked}, {probs}, {{"dim", -1}});
    std::string ctx = act(x, l + ".ctx", {s.B, s.NH, s.S, s.D}, heads_first);
    op(x, l + ".ctx", "matmul", {probs, ve}, {ctx});
    std::string ctx_t = act(x, l + ".ctx.t", q4, q4_spec);
    op(x, l + ".ctx.t", "transpose", {ctx}, {ctx_t}, swap);
    std::string flat = act(x, l + ".ctx.flat", q_full, q_spec);
    op(x, l + ".ctx.flat", "reshape", {ctx_t}, {flat}, {{"shape", g.shape(flat)}});
  });

  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, l + ".attn", hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, l + ".attn",
           [&](const Coord& x, const std::string& out) { output_projection(x, i, out); });
  });
  each_cp_tp(x0, [&](const Coord& x) {
    std::string h = act(x, l + ".h", hs, resid_spec);
    op(x, l + ".residual", "add", {at(x, resid(i)), at(x, l + ".attn")}, {h});
  });
}

void Builder::attention_backward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  const Shape q_full = {s.B, s.S, s.NH * s.D}, k_full = {s.B, s.S, s.NKV * s.D};
  const Shape q4 = {s.B, s.S, s.NH, s.D}, k4 = {s.B, s.S, s.NKV, s.D};
  const Spec q_spec = {Ax::Batch, Ax::Seq, Ax::Tp}, k_spec = {Ax::Batch, Ax::Seq, Ax::Kv};
  const Spec q4_spec = {Ax::Batch, Ax::Seq, Ax::Tp, Ax::Full};
  const Spec k4_spec = {Ax::Batch, Ax::Seq, Ax::Kv, Ax::Full};
  const Spec heads_first = {Ax::Batch, Ax::Tp, Ax::Seq, Ax::Full};
  const Spec exp_spec = {Ax::Batch, Ax::Tp, Ax::Full, Ax::Full};
  const nlohmann::json swap = {{"perm", {0, 2, 1, 3}}};
  const nlohmann::json scale = {{"factor", inv_sqrt(s.D)}};
  const int rep = s.kv_replicas();

  bias_backward(i, x0);
  each_cp(x0,
          [&](const Coord& xc) { all_gather_seq_group(xc, grad(l + ".h"), hs, resid_spec, 1); });

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string gh = gather_seq(x, grad(l + ".h"), hs, resid_spec, 1);
    const int64_t tokens = g.shape(gh)[0] * g.shape(gh)[1];
    std::string g_flat = act(x, grad(l + ".ctx.flat"), q_full, q_spec);
    op(x, grad(l + ".ctx.flat"), "matmul", {gh, weight(x, l + ".wo")}, {g_flat},
       {{"transpose_b", true}});
    // wo's gradient: tokens folded into one dimension.
    const std::string flat = at(x, l + ".ctx.flat");
    std::string flat2 = scratch(x, l + ".ctx.flat.2d", {tokens, g.shape(flat)[2]});
    op(x, l + ".ctx.flat.2d", "reshape", {flat}, {flat2}, {{"shape", g.shape(flat2)}});
    std::string gh2 = scratch(x, grad(l + ".h") + ".2d", {tokens, s.H});
    op(x, grad(l + ".h") + ".2d", "reshape", {gh}, {gh2}, {{"shape", g.shape(gh2)}});
    std::string gwo = grad_target(x, l + ".wo", "mb", g.shape(weight(x, l + ".wo")), {tokens});
    op(x, grad(l + ".wo") + ".matmul", "matmul", {flat2, gh2}, {gwo}, {{"transpose_a", true}});

    std::string g_ctx_t = act(x, grad(l + ".ctx.t"), q4, q4_spec);
    op(x, grad(l + ".ctx.t"), "reshape", {g_flat}, {g_ctx_t}, {{"shape", g.shape(g_ctx_t)}});
    std::string g_ctx = act(x, grad(l + ".ctx"), {s.B, s.NH, s.S, s.D}, heads_first);
    op(x, grad(l + ".ctx"), "transpose", {g_ctx_t}, {g_ctx}, swap);

    const Shape sc_full = {s.B, s.NH, s.S, s.S};
    const std::string probs = at(x, l + ".probs");
    std::string g_probs = act(x, grad(l + ".probs"), sc_full, heads_first);
    op(x, grad(l + ".probs"), "matmul", {g_ctx, at(x, l + ".v.exp")}, {g_probs},
       {{"transpose_b", true}});
    // Partial over the cp ranks: each holds its own queries' share.
    const Part cp_part{x.c, s.cp};
    std::string g_ve = act(x, grad(l + ".v.exp"), {s.B, s.NH, s.S, s.D}, exp_spec, cp_part);
    op(x, grad(l + ".v.exp"), "matmul", {probs, g_ctx}, {g_ve}, {{"transpose_a", true}});

    // Softmax backward: p * (g - sum(p * g)).
    std::string pg = act(x, grad(l + ".softmax.pg"), sc_full, heads_first);
    op(x, grad(l + ".softmax.pg"), "mul", {probs, g_probs}, {pg});
    std::string spg = act(x, grad(l + ".softmax.sum"), {s.B, s.NH, s.S, 1},
                          {Ax::Batch, Ax::Tp, Ax::Seq, Ax::Full});
    op(x, grad(l + ".softmax.sum"), "sum", {pg}, {spg}, {{"dims", {-1}}, {"keepdim", true}});
    std::string diff = act(x, grad(l + ".softmax.diff"), sc_full, heads_first);
    op(x, grad(l + ".softmax.diff"), "sub", {g_probs, spg}, {diff});
    std::string g_masked = act(x, grad(l + ".masked"), sc_full, heads_first);
    op(x, grad(l + ".masked"), "mul", {probs, diff}, {g_masked});
    std::string g_scores = act(x, grad(l + ".scores"), sc_full, heads_first);
    op(x, grad(l + ".scores"), "scale", {g_masked}, {g_scores}, scale);

    std::string g_qt = act(x, grad(l + ".q.t"), {s.B, s.NH, s.S, s.D}, heads_first);
    op(x, grad(l + ".q.t"), "matmul", {g_scores, at(x, l + ".k.exp")}, {g_qt});
    std::string g_ke = act(x, grad(l + ".k.exp"), {s.B, s.NH, s.S, s.D}, exp_spec, cp_part);
    op(x, grad(l + ".k.exp"), "matmul", {g_scores, at(x, l + ".q.t")}, {g_ke},
       {{"transpose_a", true}});

    // Back to kv heads (summing each group's query heads), then [b, s, h, D].
    const Part kv_part{Aff(x.c) * rep + kv_replica(x), int64_t(s.cp) * rep};
    const Spec seq_full = {Ax::Batch, Ax::Full, Ax::Kv, Ax::Full};
    for (const char* kv : {"k", "v"}) {
      const std::string base = l + "." + kv;
      std::string g_t = reduce_kv(x, at(x, grad(base + ".exp")), grad(base + ".t"), s.S);
      const std::string back = std::string(kv) == "k" ? grad(base + ".rope") : grad(base + "4");
      std::string local = s.cp > 1 ? at(x, back) + ".cp" : at(x, back);
      claim(x, local, back, k4, seq_full, kv_part);
      op(x, back + ".transpose", "transpose", {g_t}, {local}, swap);
    }
  });

  // Context parallelism: sum the K/V gradients over the cp group and keep
  // this rank's chunk.
  if (s.cp > 1) {
    for (const std::string& t : {grad(l + ".k.rope"), grad(l + ".v4")})
      each_tp(x0, [&](const Coord& xt) {
        std::vector<std::string> in, out;
        each_cp(xt, [&](const Coord& x) {
          in.push_back(at(x, t) + ".cp");
          out.push_back(act(x, t, k4, k4_spec, Part{kv_replica(x), rep}));
        });
        Coord xg = xt;  // named at the group's first member
        xg.c = 0;
        const bool skip =
            t == grad(l + ".k.rope") && s.bug("cp-kv-grad-not-reduced") && i == s.bug_layer();
        branch(skip ? site_at(xg, 0, true) : BugSite{}, [&](bool buggy) {
          if (!buggy) {
            collective(at(xg, t + ".cp_reduce_scatter"), "reduce_scatter", in, out, cp_group(xg),
                       {{"dim", 1}, {"reduce", "sum"}});
            return;
          }
          // Each cp rank keeps its own queries' share of its chunk.
          each_cp(xt, [&](const Coord& x) {
            const size_t k = sym() ? 0 : size_t(int(x.c));
            const int64_t chunk = s.S / s.cp;
            op(x, t + ".own_chunk", "slice", {in[k]}, {out[k]},
               {{"dim", 1},
                {"start", (Aff(x.c) * chunk).attr()},
                {"end", (Aff(x.c) * chunk + chunk).attr()}});
          });
        });
      });
  }

  each_cp_tp(x0, [&](const Coord& x) {
    const Part kv_part{kv_replica(x), rep};
    std::string g_qr = act(x, grad(l + ".q.rope"), q4, q4_spec);
    op(x, grad(l + ".q.rope"), "transpose", {at(x, grad(l + ".q.t"))}, {g_qr}, swap);
    std::string g_q4 = rope(x, g_qr, grad(l + ".q4"), true, q4, q4_spec);
    std::string g_k4 =
        rope(x, at(x, grad(l + ".k.rope")), grad(l + ".k4"), true, k4, k4_spec, kv_part);
    const std::string n = gather_seq(x, l + ".an.out", hs, resid_spec, 1);
    const int64_t tokens = g.shape(n)[0] * g.shape(n)[1];
    std::string n2 = scratch(x, l + ".an.out.2d", {tokens, s.H});
    op(x, l + ".an.out.2d", "reshape", {n}, {n2}, {{"shape", g.shape(n2)}});
    auto flatten = [&](const char* w, const std::string& g4, const Shape& full, const Spec& spec,
                       Part part) {
      std::string flat = act(x, grad(l + "." + w), full, spec, part);
      op(x, grad(l + "." + w), "reshape", {g4}, {flat}, {{"shape", g.shape(flat)}});
      std::string flat2 = scratch(x, grad(l + "." + w) + ".2d", {tokens, g.shape(flat)[2]});
      op(x, grad(l + "." + w) + ".2d", "reshape", {flat}, {flat2}, {{"shape", g.shape(flat2)}});
      const std::string piece = l + ".w" + w;
      std::string gw = grad_target(x, piece, "mb", g.shape(weight(x, piece)), {tokens});
      op(x, grad(piece) + ".matmul", "matmul", {n2, flat2}, {gw}, {{"transpose_a", true}});
    };
    flatten("q", g_q4, q_full, q_spec, {});
    flatten("k", g_k4, k_full, k_spec, kv_part);
    flatten("v", at(x, grad(l + ".v4")), k_full, k_spec, kv_part);
  });

  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, grad(l + ".an.out"), hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, grad(l + ".an.out"),
           [&](const Coord& x, const std::string& out) {
             std::vector<std::string> terms;
             for (const char* w : {"q", "k", "v"}) {
               std::string term = scratch(x, grad(l + ".an.out") + "." + w, g.shape(out));
               op(x, grad(l + ".an.out") + "." + w, "matmul",
                  {at(x, grad(l + "." + w)), weight(x, l + ".w" + w)}, {term},
                  {{"transpose_b", true}});
               terms.push_back(term);
             }
             std::string qk = scratch(x, grad(l + ".an.out") + ".qk", g.shape(out));
             op(x, grad(l + ".an.out") + ".qk", "add", {terms[0], terms[1]}, {qk});
             op(x, grad(l + ".an.out") + ".qkv", "add", {qk, terms[2]}, {out});
           });
  });

  each_cp_tp(x0, [&](const Coord& x) {
    std::string g_norm =
        rmsnorm_backward(x, l + ".an", at(x, resid(i)), l + ".an.w", at(x, grad(l + ".an.out")),
                         grad(l + ".an.in"), hs, resid_spec);
    std::string gx = act(x, grad(resid(i)), hs, resid_spec);
    op(x, grad(resid(i)), "add", {at(x, grad(l + ".h")), g_norm}, {gx});
  });
}

}  // namespace shardproof::planner::transformer
