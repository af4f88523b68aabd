// Backward pass of the parallel mlp, per micro-batch: the mirror of the
// forward (a column-parallel layer's input gradient is an additive tp part,
// all-reduced; a row-parallel layer's is a column shard), and the per
// micro-batch weight gradients as additive parts of the logical gradient.
#include "planner/mlp_parallel.h"

namespace shardproof::planner::mlp {

void ParallelBuilder::send_gradient(int i, int d, int t, int m) {
  // grad(act(i)) was computed by layer i+1 on the next stage.
  int from = s.stage_of(i + 1), to = s.stage_of(i);
  std::string src = at(d, t, from, m, grad(act(i)));
  std::string dst = at(d, t, to, m, grad(act(i)));
  act_tensor(dst, s.rank(d, t, to), grad(act(i)), d, m, s.local_cols(i, t));
  g.collective(src + ".send", "send", {src}, {dst}, {s.rank(d, t, from), s.rank(d, t, to)});
}

void ParallelBuilder::backward_layer(int i) {
  const int p = s.stage_of(i);
  const LayerKind kind = s.kind(i);
  const std::string l = "l" + std::to_string(i);
  const int64_t n = int64_t(s.dp) * s.mb;
  for (int d = 0; d < s.dp; ++d)
    for (int m = 0; m < s.mb; ++m) {
      std::vector<std::string> part(s.tp), full(s.tp);
      for (int t = 0; t < s.tp; ++t) {
        int r = s.rank(d, t, p);
        auto name = [&](const std::string& what) { return at(d, t, p, m, what); };
        // This layer's pre-activation gradient, in the layout of pre(i).
        std::string gp = name(grad(pre(i)));
        if (i + 1 == s.L) {
          if (s.tp > 1 && kind == LayerKind::ColumnGather) {
            // The backward of the all_gather: keep this rank's columns.
            gp += ".shard";
            act_tensor(gp, r, grad(pre(i)), d, m, s.cols(t));
            Range c = s.cols(t);
            g.op(name(l + ".bwd.slice"), "slice", {name(grad(pre(i)))}, {gp},
                 {{"dim", 1}, {"start", c.first}, {"end", c.second}});
          }
        } else {
          if (s.stage_of(i + 1) != p) send_gradient(i, d, t, m);
          act_tensor(name(dgelu(i)), r, dgelu(i), d, m, s.local_cols(i, t));
          g.op(name(l + ".bwd.dgelu"), "map", {name(pre(i))}, {name(dgelu(i))}, {{"fn", "gelu'"}});
          act_tensor(gp, r, grad(pre(i)), d, m, s.local_cols(i, t));
          g.op(name(l + ".bwd.mul"), "mul", {name(grad(act(i))), name(dgelu(i))}, {gp});
        }
        // Weight gradient of this micro-batch: part (d, m) of the global one.
        Slice ws = weight_slice(i, t);
        g.tensor(name(grad(weight(i))), extent(ws), r, Claim{grad(weight(i)), ws, d * s.mb + m, n});
        g.op(name(l + ".bwd.wgrad"), "matmul", {name(layer_input(i)), gp}, {name(grad(weight(i)))},
             {{"transpose_a", true}});
        if (i == 0) continue;  // no gradient for the data
        full[t] = name(grad(act(i - 1)));
        part[t] = full[t];
        if (kind == LayerKind::Row) {
          act_tensor(part[t], r, grad(act(i - 1)), d, m, s.cols(t));
        } else {
          if (s.tp > 1) part[t] += ".part";
          act_tensor(part[t], r, grad(act(i - 1)), d, m, s.all(), t, s.tp);
        }
        g.op(name(l + ".bwd.dgrad"), "matmul", {gp, at_rank(d, t, p, weight(i))}, {part[t]},
             {{"transpose_b", true}});
      }
      if (i == 0 || kind == LayerKind::Row || s.tp == 1) continue;
      for (int t = 0; t < s.tp; ++t)
        act_tensor(full[t], s.rank(d, t, p), grad(act(i - 1)), d, m, s.all());
      bool site = i == 2 && d == 0 && m == 0;
      tp_all_reduce(tp_op(d, p, m, l + ".bwd.tp_all_reduce"), d, p, part, full, "sum",
                    site && s.bug("tp-input-grad-not-reduced"));
    }
}

}  // namespace shardproof::planner::mlp
