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

// The logical step (and the contiguous-split bug) multiply by the fused
// [gate | up] weight and slice the product; a correct rank multiplies by its
// gate and up pieces separately (the same numbers: a fused local weight would
// be their concatenation).
bool Builder::fused_gate_up(int i) const {
  return s.logical || fires("fused-gate-up-contiguous", i, Coord{});
}

std::string Builder::fused_weight(const Coord& x, int i) const {
  return weight(x, layer(i) + (s.logical ? ".wgu" : ".wgu.block"));
}

void Builder::mlp_forward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H}, ffn = {s.B, s.S, s.F};
  each_cp_tp(x0, [&](const Coord& x) {
    rmsnorm_forward(x, l + ".mn", at(x, l + ".h"), weight(x, l + ".mn.w"), hs, kResid);
  });
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, l + ".mn.out", hs, kResid, 1); });

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string n = gather_seq(x, l + ".mn.out", hs, kResid, 1);
    std::string gate = act(x, l + ".gate", ffn, kFfn);
    std::string up = act(x, l + ".up", ffn, kFfn);
    if (fused_gate_up(i)) {
      const std::string w = fused_weight(x, i);
      const int64_t f_local = g.shape(w)[1] / 2;
      std::string gu =
          s.logical ? act(x, l + ".gu", {s.B, s.S, 2 * s.F}, {Ax::Batch, Ax::Seq, Ax::Full})
                    : scratch(x, l + ".gu.local", {g.shape(n)[0], g.shape(n)[1], 2 * f_local});
      op(x, l + ".gu", "matmul", {n, w}, {gu});
      op(x, l + ".gate", "slice", {gu}, {gate}, {{"dim", -1}, {"start", 0}, {"end", f_local}});
      op(x, l + ".up", "slice", {gu}, {up},
         {{"dim", -1}, {"start", f_local}, {"end", 2 * f_local}});
    } else {
      op(x, l + ".gate", "matmul", {n, weight(x, l + ".wgu.gate")}, {gate});
      op(x, l + ".up", "matmul", {n, weight(x, l + ".wgu.up")}, {up});
    }
    std::string a = act(x, l + ".act", ffn, kFfn);
    op(x, l + ".silu", "silu", {gate}, {a});
    std::string mid = act(x, l + ".mid", ffn, kFfn);
    op(x, l + ".mid", "mul", {a, up}, {mid});
  });

  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, l + ".mlp", hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, l + ".mlp",
           [&](const Coord& x, const std::string& out) {
             op(x, l + ".down", "matmul", {at(x, l + ".mid"), weight(x, l + ".wdown")}, {out});
           });
  });
  each_cp_tp(x0, [&](const Coord& x) {
    const std::string branch = dropout(x, i);
    std::string y = resid_out(x, i + 1);
    op(x, l + ".mlp.residual", "add", {at(x, l + ".h"), branch}, {y});
  });
  reshard_resid(x0, i + 1);
}

void Builder::mlp_backward(int i, Coord x0) {
  const std::string l = layer(i);
  const Shape hs = {s.B, s.S, s.H}, ffn = {s.B, s.S, s.F};
  const std::string gy_name = grad(resid(i + 1));
  // The MLP output's gradient: the residual's, times the dropout mask.
  const std::string g_out = s.c.dropout ? grad(l + ".mlp") : gy_name;
  if (s.c.dropout)
    each_cp_tp(x0, [&](const Coord& x) {
      std::string g = act(x, g_out, hs, kResid);
      op(x, g_out + ".dropout", "mul", {at(x, gy_name), at(x, l + ".mlp.mask")}, {g});
    });
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, g_out, hs, kResid, 1); });

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string gy = gather_seq(x, g_out, hs, kResid, 1);
    const int64_t tokens = g.shape(gy)[0] * g.shape(gy)[1];
    std::string g_mid = act(x, grad(l + ".mid"), ffn, kFfn);
    op(x, grad(l + ".mid"), "matmul", {gy, weight(x, l + ".wdown")}, {g_mid},
       {{"transpose_b", true}});
    const std::string mid = at(x, l + ".mid");
    const int64_t f_local = g.shape(mid)[2];
    std::string mid2 = scratch(x, l + ".mid.2d", {tokens, f_local});
    op(x, l + ".mid.2d", "reshape", {mid}, {mid2}, {{"shape", g.shape(mid2)}});
    std::string gy2 = scratch(x, g_out + ".2d", {tokens, s.H});
    op(x, g_out + ".2d", "reshape", {gy}, {gy2}, {{"shape", g.shape(gy2)}});
    std::string gdown =
        grad_target(x, l + ".wdown", "mb", g.shape(weight(x, l + ".wdown")), {tokens});
    op(x, grad(l + ".wdown") + ".matmul", "matmul", {mid2, gy2}, {gdown}, {{"transpose_a", true}});

    std::string g_act = act(x, grad(l + ".act"), ffn, kFfn);
    op(x, grad(l + ".act"), "mul", {g_mid, at(x, l + ".up")}, {g_act});
    std::string g_up = act(x, grad(l + ".up"), ffn, kFfn);
    op(x, grad(l + ".up"), "mul", {g_mid, at(x, l + ".act")}, {g_up});
    std::string dsilu = act(x, l + ".dsilu", ffn, kFfn);
    op(x, l + ".dsilu", "map", {at(x, l + ".gate")}, {dsilu}, {{"fn", "silu'"}});
    std::string g_gate = act(x, grad(l + ".gate"), ffn, kFfn);
    op(x, grad(l + ".gate"), "mul", {g_act, dsilu}, {g_gate});

    const std::string n = gather_seq(x, l + ".mn.out", hs, kResid, 1);
    std::string n2 = scratch(x, l + ".mn.out.2d", {tokens, s.H});
    op(x, l + ".mn.out.2d", "reshape", {n}, {n2}, {{"shape", g.shape(n2)}});
    // Weight gradient: tokens folded into one dimension.
    auto weight_grad = [&](const std::string& name, const std::string& piece,
                           const std::string& what) {
      const std::string g_act = at(x, name);
      std::string g2 = scratch(x, name + ".2d", {tokens, g.shape(g_act)[2]});
      op(x, name + ".2d", "reshape", {g_act}, {g2}, {{"shape", g.shape(g2)}});
      std::string gw = grad_target(x, piece, what, {s.H, g.shape(g_act)[2]}, {tokens});
      op(x, grad(piece) + ".matmul", "matmul", {n2, g2}, {gw}, {{"transpose_a", true}});
    };
    if (fused_gate_up(i)) {
      std::string g_gu =
          s.logical ? act(x, grad(l + ".gu"), {s.B, s.S, 2 * s.F}, {Ax::Batch, Ax::Seq, Ax::Full})
                    : scratch(x, grad(l + ".gu.local"),
                              {g.shape(g_gate)[0], g.shape(g_gate)[1], 2 * f_local});
      op(x, grad(l + ".gu"), "concat", {g_gate, g_up}, {g_gu}, {{"dim", -1}});
      weight_grad(grad(l + (s.logical ? ".gu" : ".gu.local")),
                  s.logical ? l + ".wgu" : l + ".wgu.block", "mb");
    } else {
      weight_grad(grad(l + ".gate"), l + ".wgu.gate", "mb");
      weight_grad(grad(l + ".up"), l + ".wgu.up", "mb");
    }
  });

  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, grad(l + ".mn.out"), hs, {Ax::Batch, Ax::Seq, Ax::Full}, 1, grad(l + ".mn.out"),
           [&](const Coord& x, const std::string& out) {
             const std::string gn = grad(l + ".mn.out");
             if (fused_gate_up(i)) {
               const std::string g_gu = at(x, grad(l + (s.logical ? ".gu" : ".gu.local")));
               op(x, gn + ".matmul", "matmul", {g_gu, fused_weight(x, i)}, {out},
                  {{"transpose_b", true}});
               return;
             }
             std::string a = scratch(x, gn + ".gate", g.shape(out));
             op(x, gn + ".gate", "matmul", {at(x, grad(l + ".gate")), weight(x, l + ".wgu.gate")},
                {a}, {{"transpose_b", true}});
             std::string b = scratch(x, gn + ".up", g.shape(out));
             op(x, gn + ".up", "matmul", {at(x, grad(l + ".up")), weight(x, l + ".wgu.up")}, {b},
                {{"transpose_b", true}});
             op(x, gn + ".add", "add", {a, b}, {out});
           });
  });

  each_cp_tp(x0, [&](const Coord& x) {
    std::string g_norm =
        rmsnorm_backward(x, l + ".mn", at(x, l + ".h"), l + ".mn.w", at(x, grad(l + ".mn.out")),
                         grad(l + ".mn.in"), hs, kResid);
    std::string gh = act(x, grad(l + ".h"), hs, kResid);
    op(x, grad(l + ".h"), "add", {at(x, gy_name), g_norm}, {gh});
  });
}

}  // namespace shardproof::planner::transformer
