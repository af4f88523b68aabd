// Forward pass of the parallel mlp, per micro-batch, and the local loss
// contributions on the last pipeline stage.
#include "planner/mlp_parallel.h"

namespace shardproof::planner::mlp {

void ParallelBuilder::send_activation(int i, int d, int t, int m) {
  // Layer i reads act(i-1), computed on the previous stage.
  int from = s.stage_of(i - 1), to = s.stage_of(i);
  std::string src = at(d, t, from, m, act(i - 1));
  bool first = d == 0 && t == 0 && m == 0 && i - 1 == s.bug_boundary_layer();
  if (first && s.bug("pp-send-wrong-tensor")) src = at(d, t, from, m, pre(i - 1));
  if (first && s.bug("pp-send-wrong-microbatch")) src = at(d, t, from, 1, act(i - 1));
  std::string dst = at(d, t, to, m, act(i - 1));
  act_tensor(dst, s.rank(d, t, to), act(i - 1), d, m, s.local_cols(i - 1, t));
  g.collective(at(d, t, from, m, act(i - 1) + ".send"), "send", {src}, {dst},
               {s.rank(d, t, from), s.rank(d, t, to)});
}

void ParallelBuilder::forward_layer(int i) {
  const int p = s.stage_of(i);
  const LayerKind kind = s.kind(i);
  const std::string l = "l" + std::to_string(i);
  for (int d = 0; d < s.dp; ++d)
    for (int m = 0; m < s.mb; ++m) {
      std::vector<std::string> local(s.tp), full(s.tp);
      for (int t = 0; t < s.tp; ++t) {
        if (i > 0 && s.stage_of(i - 1) != p) send_activation(i, d, t, m);
        int r = s.rank(d, t, p);
        full[t] = at(d, t, p, m, pre(i));
        local[t] = full[t];
        // Before the tp collective: a row-parallel layer holds an additive
        // part of the whole output, a gathered one a column shard.
        if (s.tp > 1 && kind == LayerKind::Row) local[t] += ".part";
        if (s.tp > 1 && kind == LayerKind::ColumnGather) local[t] += ".shard";
        if (kind == LayerKind::Row)
          act_tensor(local[t], r, pre(i), d, m, s.all(), t, s.tp);
        else
          act_tensor(local[t], r, pre(i), d, m, s.cols(t));
        g.op(at(d, t, p, m, l + ".fwd.matmul"), "matmul",
             {at(d, t, p, m, layer_input(i)), at_rank(d, t, p, weight(i))}, {local[t]});
      }
      if (s.tp > 1 && kind != LayerKind::Column) {
        for (int t = 0; t < s.tp; ++t) act_tensor(full[t], s.rank(d, t, p), pre(i), d, m, s.all());
        if (kind == LayerKind::ColumnGather) {
          g.collective(tp_op(d, p, m, l + ".fwd.tp_all_gather"), "all_gather", local, full,
                       tp_group(d, p), {{"dim", -1}});
        } else {
          bool site = i == 1 && d == 0 && m == 0;
          std::string reduce = site && s.bug("allreduce-mean-not-sum") ? "mean" : "sum";
          tp_all_reduce(tp_op(d, p, m, l + ".fwd.tp_all_reduce"), d, p, local, full, reduce,
                        site && s.bug("drop-tp-allreduce"));
        }
      }
      if (i + 1 == s.L) continue;  // no activation after the last layer
      for (int t = 0; t < s.tp; ++t) {
        act_tensor(at(d, t, p, m, act(i)), s.rank(d, t, p), act(i), d, m, s.local_cols(i, t));
        g.op(at(d, t, p, m, l + ".fwd.gelu"), "gelu", {full[t]}, {at(d, t, p, m, act(i))});
      }
    }
}

void ParallelBuilder::loss() {
  const int p = s.last_stage();
  const std::string out = pre(s.L - 1);
  // Each micro-batch contributes sum((out - y)^2) / (B*H): the parts sum to
  // the global mean. The bug divides by the micro-batch's own element count.
  int64_t count = s.bug("loss-scale-wrong-microbatch-count") ? s.mb_rows() * s.H : s.B * s.H;
  const int64_t n = int64_t(s.dp) * s.mb;
  for (int d = 0; d < s.dp; ++d)
    for (int t = 0; t < s.tp; ++t)
      for (int m = 0; m < s.mb; ++m) {
        int r = s.rank(d, t, p);
        auto name = [&](const std::string& what) { return at(d, t, p, m, what); };
        act_tensor(name("loss.diff"), r, "loss.diff", d, m, s.all());
        act_tensor(name("loss.sq"), r, "loss.sq", d, m, s.all());
        g.tensor(name("loss.sum"), {}, r);  // a partial sum: no logical counterpart
        g.tensor(name("loss"), {}, r, Claim{"loss", {}, d * s.mb + m, n});
        g.op(name("loss.fwd.sub"), "sub", {name(out), name("y")}, {name("loss.diff")});
        g.op(name("loss.fwd.square"), "square", {name("loss.diff")}, {name("loss.sq")});
        g.op(name("loss.fwd.sum"), "sum", {name("loss.sq")}, {name("loss.sum")});
        g.op(name("loss.fwd.scale"), "scale", {name("loss.sum")}, {name("loss")},
             {{"factor", fraction(1, count)}});
        // The backward seed, d loss / d out, for this micro-batch's rows.
        act_tensor(name(grad(out)), r, grad(out), d, m, s.all());
        g.op(name("loss.bwd.scale"), "scale", {name("loss.diff")}, {name(grad(out))},
             {{"factor", fraction(2, count)}});
      }
}

}  // namespace shardproof::planner::mlp
