// The parallel mlp graph builder (internal). Naming: the local copy on rank
// (d, t, p) of a logical tensor T for micro-batch m is "dp{d}.tp{t}.pp{p}.mb{m}.T";
// per-rank tensors (weights, accumulated gradients, optimizer state) drop
// ".mb{m}". Suffixes ".part" (additive tp part) and ".shard" (a tp shard of a
// tensor that is later gathered) mark the pre-collective form.
#pragma once

#include <string>
#include <vector>

#include "planner/mlp.h"

namespace shardproof::planner::mlp {

class ParallelBuilder {
 public:
  ParallelBuilder(const Layout& layout, GraphBuilder& graph) : s(layout), g(graph) {}
  void build();

 private:
  // mlp_parallel.cpp: names, claims, groups, inputs.
  std::string at(int d, int t, int p, int m, const std::string& name) const {
    return s.mb_prefix(d, t, p, m) + "." + name;
  }
  std::string at_rank(int d, int t, int p, const std::string& name) const {
    return s.rank_prefix(d, t, p) + "." + name;
  }
  // "dp{d}.pp{p}.mb{m}": names a tp collective of one micro-batch.
  std::string tp_op(int d, int p, int m, const std::string& what) const;
  std::vector<int> tp_group(int d, int p) const;
  std::vector<int> dp_group(int t, int p) const;
  // Declares an activation-like tensor [rows(d, m) x cols] of `logical`.
  void act_tensor(const std::string& name, int rank, const std::string& logical, int d, int m,
                  Range cols, int64_t k = 0, int64_t n = 1);
  // The slice of weight (or gradient, optimizer state) `layer` on tp rank t.
  Slice weight_slice(int layer, int t) const;
  Shape extent(const Slice& slice) const;
  void inputs();
  // An all_reduce over the tp group of (d, p), or a per-rank one when a bug
  // drops it (`singleton`).
  void tp_all_reduce(const std::string& name, int d, int p, const std::vector<std::string>& in,
                     const std::vector<std::string>& out, const std::string& reduce,
                     bool singleton);

  // mlp_forward.cpp
  void forward_layer(int i);
  void send_activation(int i, int d, int t, int m);
  void loss();

  // mlp_backward.cpp
  void backward_layer(int i);
  void send_gradient(int i, int d, int t, int m);

  // mlp_update.cpp
  void update_layer(int i);
  void reduce_loss();
  // Sums the micro-batch tensors on one rank; the sum carries `claim`.
  std::string accumulate(const std::vector<std::string>& terms, const std::string& result, int rank,
                         const Shape& shape, const Claim& claim);

  const Layout& s;
  GraphBuilder& g;
};

}  // namespace shardproof::planner::mlp
