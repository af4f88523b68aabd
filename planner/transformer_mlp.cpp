// SwiGLU MLP of one decoder layer, forward and backward, for one (dp rank,
// micro-batch): the fused gate/up weight is column-parallel (each rank holds
// its block of the gate columns and of the up columns), the down projection
// row-parallel.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kResid = {Ax::Batch, Ax::SeqSp, Ax::Full};
const Spec kFfn = {Ax::Batch, Ax::Seq, Ax::Tp};

}  // namespace

std::string Builder::gate_up_local(const Coord& x, int i) const {
  const std::string l = layer(i);
  if (s.logical) return weight(x, l + ".wgu");
  if (fires("fused-gate-up-contiguous", i, Coord{})) return weight(x, l + ".wgu.block");
  return at(x, l + ".wgu.local");
}

void Builder::mlp_forward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H}, ffn = {s.B, s.S, s.F};
  each_cp_tp(x0, [&](const Coord& x) {
    rmsnorm_forward(x, l + ".mn", at(x, l + ".h"), weight(x, l + ".mn.w"), hs, kResid);
  });
  for (x0.c = 0; x0.c < s.cp; ++x0.c) all_gather_seq_group(x0, l + ".mn.out", hs, kResid, 1);
  x0.c = 0;

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string n = gather_seq(x, l + ".mn.out", hs, kResid, 1);
    const std::string w = gate_up_weight(x, i);
    const int64_t f_local = g.shape(w)[1] / 2;
    std::string gu = s.logical ? act(x, l + ".gu", {s.B, s.S, 2 * s.F}, {Ax::Batch, Ax::Seq, Ax::Full})
                               : scratch(x, l + ".gu.local", {g.shape(n)[0], g.shape(n)[1], 2 * f_local});
    op(x, l + ".gu", "matmul", {n, w}, {gu});
    std::string gate = act(x, l + ".gate", ffn, kFfn);
    op(x, l + ".gate", "slice", {gu}, {gate}, {{"dim", -1}, {"start", 0}, {"end", f_local}});
    std::string up = act(x, l + ".up", ffn, kFfn);
    op(x, l + ".up", "slice", {gu}, {up}, {{"dim", -1}, {"start", f_local}, {"end", 2 * f_local}});
    std::string a = act(x, l + ".act", ffn, kFfn);
    op(x, l + ".silu", "silu", {gate}, {a});
    std::string mid = act(x, l + ".mid", ffn, kFfn);
    op(x, l + ".mid", "mul", {a, up}, {mid});
  });

  for (x0.c = 0; x0.c < s.cp; ++x0.c)
    tp_sum(x0, l + ".mlp", hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, l + ".mlp",
           [&](const Coord& x, const std::string& out) {
             op(x, l + ".down", "matmul", {at(x, l + ".mid"), weight(x, l + ".wdown")}, {out});
           });
  x0.c = 0;
  each_cp_tp(x0, [&](const Coord& x) {
    std::string y = act(x, resid(i + 1), hs, kResid);
    op(x, l + ".mlp.residual", "add", {at(x, l + ".h"), at(x, l + ".mlp")}, {y});
  });
}

void Builder::mlp_backward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H}, ffn = {s.B, s.S, s.F};
  const std::string gy_name = grad(resid(i + 1));
  for (x0.c = 0; x0.c < s.cp; ++x0.c) all_gather_seq_group(x0, gy_name, hs, kResid, 1);
  x0.c = 0;

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string gy = gather_seq(x, gy_name, hs, kResid, 1);
    const int64_t tokens = g.shape(gy)[0] * g.shape(gy)[1];
    std::string g_mid = act(x, grad(l + ".mid"), ffn, kFfn);
    op(x, grad(l + ".mid"), "matmul", {gy, weight(x, l + ".wdown")}, {g_mid},
       {{"transpose_b", true}});
    const std::string mid = at(x, l + ".mid");
    const int64_t f_local = g.shape(mid)[2];
    std::string mid2 = scratch(x, l + ".mid.2d", {tokens, f_local});
    op(x, l + ".mid.2d", "reshape", {mid}, {mid2}, {{"shape", g.shape(mid2)}});
    std::string gy2 = scratch(x, gy_name + ".2d", {tokens, s.H});
    op(x, gy_name + ".2d", "reshape", {gy}, {gy2}, {{"shape", g.shape(gy2)}});
    std::string gdown = grad_target(x, l + ".wdown", "mb", g.shape(weight(x, l + ".wdown")));
    op(x, grad(l + ".wdown") + ".matmul", "matmul", {mid2, gy2}, {gdown}, {{"transpose_a", true}});

    std::string g_act = act(x, grad(l + ".act"), ffn, kFfn);
    op(x, grad(l + ".act"), "mul", {g_mid, at(x, l + ".up")}, {g_act});
    std::string g_up = act(x, grad(l + ".up"), ffn, kFfn);
    op(x, grad(l + ".up"), "mul", {g_mid, at(x, l + ".act")}, {g_up});
    std::string dsilu = act(x, l + ".dsilu", ffn, kFfn);
    op(x, l + ".dsilu", "map", {at(x, l + ".gate")}, {dsilu}, {{"fn", "silu'"}});
    std::string g_gate = act(x, grad(l + ".gate"), ffn, kFfn);
    op(x, grad(l + ".gate"), "mul", {g_act, dsilu}, {g_gate});

    std::string g_gu = s.logical ? act(x, grad(l + ".gu"), {s.B, s.S, 2 * s.F},
                                       {Ax::Batch, Ax::Seq, Ax::Full})
                                 : scratch(x, grad(l + ".gu.local"),
                                           {g.shape(g_gate)[0], g.shape(g_gate)[1], 2 * f_local});
    op(x, grad(l + ".gu"), "concat", {g_gate, g_up}, {g_gu}, {{"dim", -1}});
    const std::string n = gather_seq(x, l + ".mn.out", hs, kResid, 1);
    std::string n2 = scratch(x, l + ".mn.out.2d", {tokens, s.H});
    op(x, l + ".mn.out.2d", "reshape", {n}, {n2}, {{"shape", g.shape(n2)}});
    std::string g_gu2 = scratch(x, grad(l + ".gu") + ".2d", {tokens, 2 * f_local});
    op(x, grad(l + ".gu") + ".2d", "reshape", {g_gu}, {g_gu2}, {{"shape", g.shape(g_gu2)}});
    // The gradient of the fused weight, then cut into the pieces this rank holds.
    const Shape w_local = {s.H, 2 * f_local};
    if (s.logical || fires("fused-gate-up-contiguous", i, Coord{})) {
      const std::string piece = s.logical ? l + ".wgu" : l + ".wgu.block";
      std::string gw = grad_target(x, piece, "mb", w_local);
      op(x, grad(l + ".wgu") + ".matmul", "matmul", {n2, g_gu2}, {gw}, {{"transpose_a", true}});
    } else {
      std::string gw = scratch(x, grad(l + ".wgu.local"), w_local);
      op(x, grad(l + ".wgu") + ".matmul", "matmul", {n2, g_gu2}, {gw}, {{"transpose_a", true}});
      int64_t start = 0;
      for (const char* half : {"gate", "up"}) {
        const std::string piece = l + ".wgu." + half;
        std::string target = grad_target(x, piece, "mb", {s.H, f_local});
        op(x, grad(piece) + ".slice", "slice", {gw}, {target},
           {{"dim", 1}, {"start", start}, {"end", start + f_local}});
        start += f_local;
      }
    }
  });

  for (x0.c = 0; x0.c < s.cp; ++x0.c)
    tp_sum(x0, grad(l + ".mn.out"), hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, grad(l + ".mn.out"),
           [&](const Coord& x, const std::string& out) {
             const std::string g_gu = s.logical ? at(x, grad(l + ".gu")) : at(x, grad(l + ".gu.local"));
             op(x, grad(l + ".mn.out") + ".matmul", "matmul", {g_gu, gate_up_local(x, i)}, {out},
                {{"transpose_b", true}});
           });
  x0.c = 0;

  each_cp_tp(x0, [&](const Coord& x) {
    std::string g_norm =
        rmsnorm_backward(x, l + ".mn", at(x, l + ".h"), l + ".mn.w", at(x, grad(l + ".mn.out")),
                         grad(l + ".mn.in"), hs, kResid);
    std::string gh = act(x, grad(l + ".h"), hs, kResid);
    op(x, grad(l + ".h"), "add", {at(x, gy_name), g_norm}, {gh});
  });
}

}  // namespace shardproof::planner::transformer
