// The `mlp` family, internal: its layout over the device mesh, the names of
// its logical tensors, its bug catalogue and its two graph builders.
#pragma once

#include <string>
#include <vector>

#include "planner/plan_builder.h"
#include "planner/planner.h"

namespace shardproof::planner::mlp {

// Logical tensor names, shared by both graphs and the bug hints:
// l{i}.pre = in_i @ w_i, l{i}.act = gelu(pre), l{i}.dgelu = gelu'(pre).
inline std::string layer_tensor(int i, const char* what) {
  return "l" + std::to_string(i) + "." + what;
}
inline std::string pre(int i) {
  return layer_tensor(i, "pre");
}
inline std::string act(int i) {
  return layer_tensor(i, "act");
}
inline std::string dgelu(int i) {
  return layer_tensor(i, "dgelu");
}
inline std::string weight(int i) {
  return "w" + std::to_string(i);
}
inline std::string adam_m(int i) {
  return "m" + std::to_string(i);
}
inline std::string adam_v(int i) {
  return "v" + std::to_string(i);
}
inline std::string grad(const std::string& t) {
  return "grad." + t;
}
inline std::string next(const std::string& t) {
  return t + ".next";
}
// The input of layer i: x, or the previous layer's activation.
inline std::string layer_input(int i) {
  return i == 0 ? "x" : act(i - 1);
}

// Megatron pairs: column-parallel then row-parallel; an odd last layer is
// column-parallel and its output all-gathered.
enum class LayerKind { Column, Row, ColumnGather };

// Validated configuration plus the index arithmetic of the device mesh.
struct Layout {
  explicit Layout(const PlanConfig& config);  // throws std::invalid_argument

  PlanConfig c;
  int L, dp, tp, pp, mb;
  int64_t B, H;

  bool adam() const { return c.optimizer == "adam"; }
  bool bug(const char* name) const { return c.bug == name; }
  int world() const { return dp * tp * pp; }
  // tp fastest, then dp, then pp (Megatron's order): a tp group is contiguous.
  int rank(int d, int t, int p) const { return (p * dp + d) * tp + t; }
  int64_t mb_rows() const { return B / (dp * mb); }
  Range rows(int d, int m) const {
    return {(d * mb + m) * mb_rows(), (d * mb + m + 1) * mb_rows()};
  }
  Range cols(int t) const { return {t * (H / tp), (t + 1) * (H / tp)}; }
  Range all() const { return {0, H}; }
  LayerKind kind(int layer) const;
  // Columns of layer i's pre-activation (and activation) held by tp rank t
  // before any tp collective: a shard for column-parallel layers, all of it
  // for row-parallel ones.
  Range local_cols(int layer, int t) const;
  // Pipeline: contiguous stages, the first L % pp stages one layer longer.
  int stage_begin(int p) const;
  int stage_end(int p) const { return stage_begin(p + 1); }
  int stage_of(int layer) const;
  int last_stage() const { return pp - 1; }
  // The pipeline boundary the pp-send-* bugs corrupt: the end of the stage
  // holding the middle layer (ceil(L/2) - 1), never the last stage.
  int bug_boundary_layer() const { return stage_end(stage_of((L + 1) / 2 - 1)) - 1; }

  std::string rank_prefix(int d, int t, int p) const;
  std::string mb_prefix(int d, int t, int p, int m) const;
};

struct BugSpec {
  BugInfo info;
  // Empty when the bug applies to the layout, else why not (e.g. "needs tp >= 2").
  std::string (*not_applicable)(const Layout&);
  std::string (*first_tensor)(const Layout&);
};

const std::vector<BugSpec>& bug_table();
// Throws std::invalid_argument for an unknown or inapplicable bug.
const BugSpec* find_bug(const Layout& layout);

// The optimizer's attributes (the same in both graphs).
nlohmann::json optimizer_attrs(const Layout& layout);

void build_logical(const Layout& layout, GraphBuilder& g);
void build_parallel(const Layout& layout, GraphBuilder& g);
// The same parallel graph in the compact form (mlp_compact.cpp).
nlohmann::json build_compact_parallel(const Layout& layout);

}  // namespace shardproof::planner::mlp
