#include "engine/stage/narrowing_rules.h"
#include "engine/stage/boxes.h"

#include <optional>
#include <set>

#include "engine/core/tensor.h"
#include "engine/ops/op_registry.h"
#include "engine/stage/demanded_region.h"

namespace shardproof {
namespace {

int dim_attr(const AttrMap& attrs, const char* key, size_t rank, int64_t fallback) {
  auto it = attrs.find(key);
  int64_t d = it != attrs.end() && it->second.is_int() ? it->second.as_int() : fallback;
  return static_cast<int>(d < 0 ? d + static_cast<int64_t>(rank) : d);
}

// Ops whose output box is computed by the same op on the operand boxes that
// demanded_region.h gives (elementwise with broadcasting, data movement at
// fixed offsets, reductions and contractions over whole lines).
bool by_demand_rules(const std::string& op) {
  static const std::set<std::string> names = {
      "add",     "sub",    "mul",  "div",    "maximum",    "minimum",     "neg",
      "exp",     "log",    "sqrt", "rsqrt",  "tanh",       "sigmoid",     "relu",
      "gelu",    "silu",   "erf",  "square", "reciprocal", "scale",       "pow",
      "map",     "where",  "eq",   "lt",     "le",         "gt",          "ge",
      "cast",    "expand", "sgd",  "adam",   "slice",      "concat",      "transpose",
      "reshape", "sum",    "mean", "max",    "softmax",    "log_softmax", "matmul"};
  return names.count(op) > 0;
}

// The box an op can compute for `demand`: lines it reads whole (a softmax's
// dim, a norm's last dim, the dims a reshape folds, iota's dim from 0) are
// widened to the whole line.
SliceSpec widened(const std::string& op, const AttrMap& attrs, const std::vector<TensorInfo>& in,
                  const Shape& out, SliceSpec r) {
  if (op == "softmax" || op == "log_softmax") {
    const int d = dim_attr(attrs, "dim", out.size(), -1);
    r[d] = {0, out[d]};
  } else if ((op == "layernorm" || op == "rmsnorm") && !out.empty()) {
    r.back() = {0, out.back()};
  } else if (op == "iota") {
    r[dim_attr(attrs, "dim", out.size(), 0)].first = 0;
  } else if (op == "reshape") {
    // Trailing dims the reshape leaves alone keep their box (as in
    // demanded_region.cpp); the dims it folds are whole.
    const Shape& x = in[0].shape;
    size_t kept = 0;
    while (kept < std::min(x.size(), out.size()) &&
           x[x.size() - 1 - kept] == out[out.size() - 1 - kept])
      ++kept;
    for (size_t d = 0; d + kept < out.size(); ++d) r[d] = {0, out[d]};
  }
  return r;
}

NarrowedOp whole_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorInfo>& in,
                    const std::vector<TensorInfo>& out) {
  NarrowedOp n{op, attrs, {}, {}};
  for (const TensorInfo& t : out) n.out.push_back(whole_box(t.shape));
  for (const TensorInfo& t : in) n.in.push_back(whole_box(t.shape));
  return n;
}

// `n` when the operator's own shape rule gives its boxes' sizes, else `whole`.
NarrowedOp checked(NarrowedOp n, const std::vector<TensorInfo>& in,
                   const std::vector<TensorInfo>& out, NarrowedOp whole) {
  const OpDef* def = OpRegistry::instance().find(n.op);
  std::vector<TensorInfo> narrowed_in, narrowed_out;
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k].shape.empty() || !empty_box(n.in[k]))
      narrowed_in.push_back({box_sizes(n.in[k]), in[k].dtype});
  const size_t n_out = n.per_output ? 1 : out.size();
  if (!def || !def->infer(n.attrs, narrowed_in, n_out, narrowed_out).empty()) return whole;
  for (size_t o = 0; o < out.size(); ++o) {
    const size_t from = n.per_output ? 0 : o;
    if (from >= narrowed_out.size() || narrowed_out[from].shape != box_sizes(n.out[o]))
      return whole;
  }
  return n;
}

// split: every output keeps the split dim whole (so `sizes` is unchanged),
// the other dims take the demand's box, the operand that box with its dim
// whole. Outputs differ only along the split dim, so one demand hull fits all.
NarrowedOp split_op(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                    const std::vector<TensorInfo>& out, const SliceSpec& demand) {
  const int d = dim_attr(attrs, "dim", in[0].shape.size(), 0);
  NarrowedOp n{"split", attrs, {}, {}};
  if (d < 0 || static_cast<size_t>(d) >= demand.size()) return n;  // checked() rejects it
  SliceSpec r = demand;
  r[d] = {0, in[0].shape[d]};
  n.in = {r};
  for (const TensorInfo& t : out) {
    r[d] = {0, t.shape[d]};
    n.out.push_back(r);
  }
  return n;
}

// random: a draw at the box, its positions still those of `full` (offset
// moved by the box's start), so every element draws exactly what it drew.
NarrowedOp random_op(const AttrMap& attrs, const Shape& shape, const SliceSpec& r) {
  NarrowedOp n{"random", attrs, {r}, {SliceSpec{}}};  // the state is a scalar
  const Shape full = attrs.count("full") ? attrs.at("full").as_int_list() : shape;
  Shape offset = attrs.count("offset") ? attrs.at("offset").as_int_list() : Shape(shape.size());
  if (offset.size() != r.size() || full.size() != r.size()) return n;  // checked() rejects it
  for (size_t d = 0; d < r.size(); ++d) offset[d] += r[d].first;
  n.attrs["shape"] = Attr::of_int_list(box_sizes(r));
  n.attrs["full"] = Attr::of_int_list(full);
  n.attrs["offset"] = Attr::of_int_list(offset);
  return n;
}

// The smallest range [lo, hi) of flat (row-major) positions of `shape`
// holding [lo, hi) that is a box: leading dims at one index, one dim a
// range, the trailing dims whole.
std::pair<int64_t, int64_t> flat_box(const Shape& shape, int64_t lo, int64_t hi) {
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    const int64_t block = stride * shape[k];
    const int64_t l = lo / stride * stride, h = (hi + stride - 1) / stride * stride;
    if (l / block == (h - 1) / block) return {l, h};
    stride = block;
  }
  return {0, stride};
}

SliceSpec box_of_range(const Shape& shape, int64_t lo, int64_t hi) {
  const std::vector<int64_t> first = unflatten(shape, lo), last = unflatten(shape, hi - 1);
  SliceSpec box;
  for (size_t d = 0; d < shape.size(); ++d) box.push_back({first[d], last[d] + 1});
  return box;
}

// reshape keeps the row-major order: a run of flat positions that is a box
// of both shapes is the same elements in the same order on both sides, so
// the narrowed op is a reshape of the operand's box. The demand's flat hull
// is widened until it is a box of both (a single element, a row: exact).
std::optional<NarrowedOp> reshape_op(const AttrMap& attrs, const Shape& in, const Shape& out,
                                     const SliceSpec& demand) {
  if (demand.size() != out.size() || empty_box(demand) || element_count(out) == 0)
    return std::nullopt;
  std::vector<int64_t> first, last;
  for (auto [lo, hi] : demand) first.push_back(lo), last.push_back(hi - 1);
  int64_t lo = flat_index(out, first), hi = flat_index(out, last) + 1;
  for (;;) {
    const auto [a, b] = flat_box(out, lo, hi);
    const auto [c, d] = flat_box(in, a, b);
    if (c == lo && d == hi) break;
    lo = c, hi = d;
  }
  NarrowedOp n{"reshape", attrs, {box_of_range(out, lo, hi)}, {box_of_range(in, lo, hi)}};
  n.attrs["shape"] = Attr::of_int_list(box_sizes(n.out[0]));
  return n;
}

}  // namespace

NarrowedOp narrow_op(const std::string& op, const AttrMap& attrs, const std::vector<TensorInfo>& in,
                     const std::vector<TensorInfo>& out, const SliceSpec& demand) {
  NarrowedOp whole = whole_op(op, attrs, in, out);
  if (op == "split" && in.size() == 1 && !out.empty())
    return checked(split_op(attrs, in, out, demand), in, out, whole);
  for (const TensorInfo& t : out)
    if (t.shape != out[0].shape) return whole;  // split: outputs of several shapes
  if (out.empty()) return whole;
  std::vector<Shape> in_shapes, out_shapes;
  for (const TensorInfo& t : in) in_shapes.push_back(t.shape);
  for (const TensorInfo& t : out) out_shapes.push_back(t.shape);
  const Shape& shape = out[0].shape;
  const SliceSpec r = widened(op, attrs, in, shape, demand);
  if (op == "random") return checked(random_op(attrs, shape, r), in, out, whole);
  // A reshape has two rules: trailing dims it leaves alone (a column stays
  // a column) and flat runs (an element of a reshape that mixes every dim
  // stays an element); the one reading less of the operand is used.
  std::optional<NarrowedOp> flat_run;
  if (op == "reshape" && in.size() == 1)
    if (std::optional<NarrowedOp> f = reshape_op(attrs, in[0].shape, shape, demand))
      flat_run = checked(std::move(*f), in, out, whole);
  NarrowedOp n{op, attrs, std::vector<SliceSpec>(out.size(), r), {}};
  if (by_demand_rules(op)) {
    if (op == "matmul" && (shape.size() < 2 || in[0].shape.size() < 2 || in[1].shape.size() < 2))
      return whole;
    for (size_t k = 0; k < in.size(); ++k)
      n.in.push_back(operand_demand(op, attrs, in_shapes, out_shapes, k, r));
  } else if (op == "layernorm" || op == "rmsnorm") {
    n.in.push_back(r);
    for (size_t k = 1; k < in.size(); ++k) n.in.push_back(whole_box(in[k].shape));
  } else if (op == "all_reduce" || op == "broadcast" || op == "send") {
    n.in.assign(in.size(), r);  // every member's box is the same box
  } else if (op == "all_gather") {
    // Each output is the concat of the inputs in group order.
    n.op = "concat";
    n.attrs = {{"dim", attrs.at("dim")}};
    n.per_output = true;
    std::vector<Shape> one_out = {shape};
    for (size_t k = 0; k < in.size(); ++k)
      n.in.push_back(operand_demand("concat", n.attrs, in_shapes, one_out, k, r));
  } else if (op == "embedding" && !r.empty() && in[1].shape.size() == 2) {
    // Ids are positions on the table's rows, which stay whole.
    n.in.push_back(SliceSpec(r.begin(), r.end() - 1));
    n.in.push_back({{0, in[1].shape[0]}, r.back()});
  } else if (op == "gather") {
    // out[i] = x[i with dim := index[i]]: x at the same positions, its dim whole.
    const int d = dim_attr(attrs, "dim", shape.size(), 0);
    SliceSpec x = r;
    x[d] = {0, in[0].shape[d]};
    n.in = {x, r};
  } else if (op != "const" && op != "iota") {
    return whole;
  }
  // Attributes that carry sizes or positions.
  if (op == "expand" || op == "reshape" || op == "const" || op == "iota")
    n.attrs["shape"] = Attr::of_int_list(box_sizes(r));
  if (op == "slice") {
    // The operand box is exactly the sliced part: the slice is the identity.
    const int d = dim_attr(attrs, "dim", shape.size(), 0);
    n.attrs["start"] = Attr::of_int(0);
    n.attrs["end"] = Attr::of_int(r[d].second - r[d].first);
  }
  NarrowedOp trailing = checked(std::move(n), in, out, whole);
  if (flat_run &&
      element_count(box_sizes(flat_run->in[0])) < element_count(box_sizes(trailing.in[0])))
    return *flat_run;
  return trailing;
}

}  // namespace shardproof
