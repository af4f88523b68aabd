// A compact parallel graph (shardproof-plan/1.1) as read from its JSON: the
// mesh and the programs, every template parsed, every element still tied to
// the JSON value it came from (for messages). Internal to the plan parser.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/format/compact/compact_expr.h"
#include "engine/format/v1/plan_validation.h"

namespace shardproof::compact {

struct Mesh {
  std::vector<int> axes;        // device axes (kAxisNames indices), slowest first
  std::vector<int64_t> sizes;   // parallel to axes
  std::vector<int64_t> stride;  // rank = sum of coordinate * stride
  int64_t mb = 1;
  int64_t world = 1;
  AxisMask declared = 0;  // the device axes and mb

  int64_t size(int axis) const;  // 1 for an undeclared axis, mb for kMbAxis
  int64_t rank(const Coord& c) const {
    int64_t r = 0;
    for (size_t i = 0; i < axes.size(); ++i) r += c[axes[i]] * stride[i];
    return r;
  }
  // One number per instance coordinate (device and micro-batch): the key
  // selections and explorations file instances under.
  int64_t pack(const Coord& c) const { return rank(c) * mb + c[kMbAxis]; }
  // The device coordinates of `rank` (mb left 0).
  Coord coord(int64_t rank) const;
  // Member j of the group through `c` along `group` (row-major over the
  // group axes, in the order listed).
  Coord member(const std::vector<int>& group, Coord c, int64_t j) const {
    for (size_t i = group.size(); i-- > 0;) {
      c[group[i]] = j % size(group[i]);
      j /= size(group[i]);
    }
    return c;
  }
  // "pp=0 dp=1 tp=0 mb=2" (mb only when `with_mb`).
  std::string describe(const Coord& c, bool with_mb) const;
};

// One axis of a restricted claim ("over"): [lo, hi], or [lo, hi, step,
// count] when `strided`.
struct OverTemplate {
  Affine lo, hi, step, count;
  bool strided = false;
  AxisMask mask() const { return lo.mask() | hi.mask() | step.mask() | count.mask(); }
};

struct Lineage {
  Template tensor;
  bool has_slice = false;
  std::vector<std::pair<Affine, Affine>> slice;
  bool has_part = false;
  Affine part_k, part_n;
  std::vector<OverTemplate> over;  // a restricted claim's set (empty: none)
  AxisMask mask() const {
    AxisMask m = tensor.mask() | part_k.mask() | part_n.mask();
    for (const auto& [lo, hi] : slice) m |= lo.mask() | hi.mask();
    for (const OverTemplate& o : over) m |= o.mask();
    return m;
  }
};

struct TensorTemplate {
  explicit TensorTemplate(const plan_detail::Node& n) : node(n) {}
  plan_detail::Node node;
  Template name;
  // Copied into every instance as written; the v1 rules check them there.
  std::string shape_json, dtype_json;
  std::optional<Lineage> of;
  Condition when;
  bool input = false, output = false;
  bool per_mb = false;  // mentions mb somewhere (or its program's "on" does)
};

// One attribute: its JSON as written, or {"expr": E}, evaluated per instance,
// or a list some of whose items are {"expr": E} (a random op's "offset").
struct AttrTemplate {
  std::string key;
  std::string value_json;
  std::optional<Affine> expr;
  // A list with expressions: per item, its JSON as written or its expression.
  std::vector<std::pair<std::string, std::optional<Affine>>> items;
  bool is_list = false;
  AxisMask mask() const {
    AxisMask m = expr ? expr->mask() : 0;
    for (const auto& [json, e] : items)
      if (e) m |= e->mask();
    return m;
  }
};

struct OpTemplate {
  enum class Kind { Local, Collective, Send };
  explicit OpTemplate(const plan_detail::Node& n) : node(n) {}
  plan_detail::Node node;
  std::optional<Template> name;
  std::string op;
  std::vector<Template> in, out;
  bool has_attrs = false;
  std::vector<AttrTemplate> attrs;
  Condition when;
  Kind kind = Kind::Local;
  std::vector<int> group;  // collectives: axes, in member order
  Coord to{};              // send: the offset
  bool per_mb = false;
};

struct Program {
  explicit Program(const plan_detail::Node& n) : node(n) {}
  plan_detail::Node node;
  std::string name;
  Condition on;
  std::vector<TensorTemplate> tensors;
  std::vector<OpTemplate> ops;
};

struct CompactGraph {
  Mesh mesh;
  std::vector<Program> programs;
};

// A compact plan kept unexpanded for the class verifier (Plan::compact): the
// graph and the JSON documents its nodes point into.
struct CompactSource {
  explicit CompactSource(CompactGraph g) : graph(std::move(g)) {}
  CompactGraph graph;
  std::vector<std::shared_ptr<jsonsrc::Value>> documents;
  std::shared_ptr<std::deque<std::string>> files;
  plan_detail::GraphSyntax logical_syntax;
};

// Reads and checks the compact form's own rules (mesh, compact-expr,
// compact-axis, compact-group, compact-send, unknown keys); throws
// plan_detail::InvalidPlan. The v1 rules are checked on the expansion.
CompactGraph read_compact(const plan_detail::Node& parallel);

}  // namespace shardproof::compact
