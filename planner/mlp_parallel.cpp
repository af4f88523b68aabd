// The parallel mlp graph: placement of the inputs, and the order in which
// the per-layer builders run (forward, loss, backward, optimizer).
#include "planner/mlp_parallel.h"

namespace shardproof::planner::mlp {

void build_parallel(const Layout& layout, GraphBuilder& g) {
  ParallelBuilder(layout, g).build();
}

void ParallelBuilder::build() {
  inputs();
  for (int i = 0; i < s.L; ++i) forward_layer(i);
  loss();
  for (int i = s.L - 1; i >= 0; --i) backward_layer(i);
  for (int i = 0; i < s.L; ++i) update_layer(i);
  reduce_loss();
}

std::string ParallelBuilder::tp_op(int d, int p, int m, const std::string& what) const {
  return "dp" + std::to_string(d) + ".pp" + std::to_string(p) + ".mb" + std::to_string(m) + "." +
         what;
}

std::vector<int> ParallelBuilder::tp_group(int d, int p) const {
  std::vector<int> group;
  for (int t = 0; t < s.tp; ++t) group.push_back(s.rank(d, t, p));
  return group;
}

std::vector<int> ParallelBuilder::dp_group(int t, int p) const {
  std::vector<int> group;
  for (int d = 0; d < s.dp; ++d) group.push_back(s.rank(d, t, p));
  return group;
}

void ParallelBuilder::act_tensor(const std::string& name, int rank, const std::string& logical,
                                 int d, int m, Range cols, int64_t k, int64_t n) {
  Range rows = s.rows(d, m);
  g.tensor(name, {rows.second - rows.first, cols.second - cols.first}, rank,
           Claim{logical, {rows, cols}, k, n});
}

Slice ParallelBuilder::weight_slice(int layer, int t) const {
  // Column-parallel: a block of columns; row-parallel: a block of rows.
  if (s.kind(layer) == LayerKind::Row) return {s.cols(t), s.all()};
  return {s.all(), s.cols(t)};
}

Shape ParallelBuilder::extent(const Slice& slice) const {
  Shape shape;
  for (auto [lo, hi] : slice) shape.push_back(hi - lo);
  return shape;
}

void ParallelBuilder::inputs() {
  for (int p = 0; p < s.pp; ++p)
    for (int d = 0; d < s.dp; ++d)
      for (int t = 0; t < s.tp; ++t) {
        int r = s.rank(d, t, p);
        // Data: each micro-batch's rows, on the stage that reads them.
        for (int m = 0; m < s.mb; ++m) {
          if (p == 0) act_tensor(at(d, t, p, m, "x"), r, "x", d, m, s.all());
          if (p == s.last_stage()) act_tensor(at(d, t, p, m, "y"), r, "y", d, m, s.all());
          if (p == 0) g.input(at(d, t, p, m, "x"));
          if (p == s.last_stage()) g.input(at(d, t, p, m, "y"));
        }
        for (int i = s.stage_begin(p); i < s.stage_end(p); ++i) {
          Slice w = weight_slice(i, t);
          // swapped-shards: tp ranks 0 and 1 of dp rank 0 load each other's
          // layer-0 shard, while everything downstream assumes their own.
          if (s.bug("swapped-shards") && i == 0 && d == 0 && t < 2) w = weight_slice(i, 1 - t);
          g.tensor(at_rank(d, t, p, weight(i)), extent(w), r, Claim{weight(i), w});
          g.input(at_rank(d, t, p, weight(i)));
          if (!s.adam()) continue;
          for (const std::string& st : {adam_m(i), adam_v(i)}) {
            g.tensor(at_rank(d, t, p, st), extent(weight_slice(i, t)), r,
                     Claim{st, weight_slice(i, t)});
            g.input(at_rank(d, t, p, st));
          }
        }
      }
}

void ParallelBuilder::tp_all_reduce(const std::string& name, int d, int p,
                                    const std::vector<std::string>& in,
                                    const std::vector<std::string>& out, const std::string& reduce,
                                    bool singleton) {
  if (!singleton) {
    g.collective(name, "all_reduce", in, out, tp_group(d, p), {{"reduce", reduce}});
    return;
  }
  for (int t = 0; t < s.tp; ++t)
    g.collective(name + ".tp" + std::to_string(t), "all_reduce", {in[t]}, {out[t]},
                 {s.rank(d, t, p)}, {{"reduce", reduce}});
}

}  // namespace shardproof::planner::mlp
