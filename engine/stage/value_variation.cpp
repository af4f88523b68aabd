#include "engine/stage/value_variation.h"

#include <set>
#include <string>

namespace shardproof::reduction {
namespace {

// Along one axis of a value: d, it may depend on the position along the
// axis; v, every term of it does (none is repeated along the axis). A
// stage input has both; a constant or a broadcast operand neither.
struct Flags {
  bool d = false, v = false;
};
constexpr Flags kConstant{false, false};
constexpr Flags kVarying{true, true};

// How an op's output terms follow from its operands' along one axis.
enum class Kind {
  Add,         // terms of every operand (sums, data movement): v if all are
  Mul,         // products: v if any factor's terms all vary
  Div,         // a / b: v if a's terms vary and b is constant along the axis
  Reciprocal,  // 1 / x: never v
  Call,        // an uninterpreted function: v if its argument depends at all
  Compare,     // indicators (and floors): never v, e.g. eq(p, q) = 1 - p - q + 2pq
  Constant,    // const, and ops whose operands cancel: x - x, x / x, eq(x, x)
  Iota,        // its values along its dim, constant along the others
  Where,       // v if both branches are
  Select,      // embedding, gather: the row picked varies as the index does
  LogSoftmax,  // minus the row's log-sum-exp: never v along dim
  LayerNorm,   // plus the bias, repeated along every other dim
  Opaque,      // anything else: never v
};

const StageTensor& in_tensor(const Stage& s, const StageOp& op, size_t i) {
  return s.tensors[static_cast<size_t>(op.in.at(i))];
}

bool cancels(const StageOp& op) {
  static const std::set<std::string> ops = {"sub", "div", "eq", "lt", "le", "gt", "ge"};
  return op.in.size() == 2 && op.in[0] == op.in[1] && ops.count(op.op) > 0;
}

Kind kind_of(const Stage& s, const StageOp& op) {
  static const std::set<std::string> add = {
      "add",       "sub",        "maximum",    "minimum",   "neg",    "relu",   "reshape",
      "transpose", "slice",      "concat",     "split",     "expand", "sum",    "mean",
      "max",       "all_gather", "all_to_all", "broadcast", "send",   "softmax"};
  static const std::set<std::string> mul = {"mul", "matmul", "square", "rmsnorm"};
  static const std::set<std::string> call = {"exp",     "log", "sqrt", "rsqrt", "tanh",
                                             "sigmoid", "erf", "gelu", "silu",  "map"};
  static const std::set<std::string> compare = {"eq", "lt", "le", "gt", "ge"};
  const std::string& n = op.op;
  if (cancels(op)) return Kind::Constant;
  if (add.count(n)) return Kind::Add;
  if (mul.count(n)) return Kind::Mul;
  if (call.count(n)) return Kind::Call;
  if (compare.count(n)) return Kind::Compare;
  if (n == "div") return Kind::Div;
  if (n == "reciprocal") return Kind::Reciprocal;
  if (n == "const") return Kind::Constant;
  if (n == "iota") return Kind::Iota;
  if (n == "where") return Kind::Where;
  if (n == "embedding" || n == "gather") return Kind::Select;
  if (n == "log_softmax") return Kind::LogSoftmax;
  if (n == "layernorm") return Kind::LayerNorm;
  if (n == "all_reduce" || n == "reduce_scatter") return Kind::Add;  // sum, mean or max
  if (n == "scale") {
    auto it = op.attrs.find("factor");
    return it != op.attrs.end() && it->second.number == 0 ? Kind::Constant : Kind::Add;
  }
  if (n == "pow") {
    auto it = op.attrs.find("exponent");
    return it != op.attrs.end() && it->second.is_int() && it->second.as_int() == 0 ? Kind::Constant
                                                                                   : Kind::Mul;
  }
  if (n == "cast" && !op.in.empty() && !op.out.empty()) {
    DClass from = dclass_of(in_tensor(s, op, 0).dtype);
    DClass to = dclass_of(s.tensors[static_cast<size_t>(op.out[0])].dtype);
    bool lossy =
        (to == DClass::Bool && from != DClass::Bool) || (to == DClass::Int && from == DClass::Real);
    return lossy ? Kind::Compare : Kind::Add;
  }
  return Kind::Opaque;
}

// The normalised `dim` attribute of an op whose operand has rank `rank`.
int dim_attr(const StageOp& op, size_t rank) {
  auto it = op.attrs.find("dim");
  if (it == op.attrs.end() || !it->second.is_int()) return -1;
  int64_t d = it->second.as_int();
  return static_cast<int>(d < 0 ? d + static_cast<int64_t>(rank) : d);
}

bool same(AxisRef a, AxisRef b) {
  return a.slot == b.slot && a.dim == b.dim;
}

class Variation {
 public:
  Variation(const Stage& stage, const std::vector<OpAxes>& axes)
      : stage_(stage), axes_(axes), flags_(stage.tensors.size()), bounded_(stage.tensors.size()) {
    for (size_t t = 0; t < stage.tensors.size(); ++t) {
      const StageTensor& st = stage.tensors[t];
      flags_[t].assign(st.full_shape.size(), kConstant);
      if (st.free && !st.parallel) {
        flags_[t].assign(st.full_shape.size(), kVarying);
        bounded_[t] = dclass_of(st.dtype) == DClass::Bool;
      }
    }
    for (size_t i = 0; i < stage.ops.size(); ++i)
      if (!stage.ops[i].parallel) run(i);
    // A plain claim is its logical slice; a part is free leaves, the last
    // one the slice minus them.
    for (size_t t = 0; t < stage.tensors.size(); ++t) {
      const StageTensor& st = stage.tensors[t];
      if (!st.free || !st.parallel) continue;
      if (!st.of || st.logical_index < 0 ||
          flags_[st.logical_index].size() != st.full_shape.size()) {
        flags_[t].assign(st.full_shape.size(), kVarying);
        continue;
      }
      flags_[t] = flags_[st.logical_index];
      bounded_[t] = bounded_[st.logical_index] && !st.of->has_part;
      if (st.of->has_part)
        for (Flags& f : flags_[t]) f.d = true;
    }
    for (size_t i = 0; i < stage.ops.size(); ++i)
      if (stage.ops[i].parallel) run(i);
  }

  std::vector<std::pair<int, int>> exposing() const {
    std::vector<std::pair<int, int>> out;
    for (size_t i = 0; i < stage_.ops.size(); ++i) {
      const StageOp& op = stage_.ops[i];
      for (AxisRef c : axes_[i].combines) {
        if (c.slot >= static_cast<int>(op.in.size())) continue;
        if (exposes(i, c)) out.push_back({op.in[static_cast<size_t>(c.slot)], c.dim});
      }
    }
    return out;
  }

 private:
  Flags flag(const StageOp& op, AxisRef r) const {
    const std::vector<Flags>& f = flags_[static_cast<size_t>(op.in.at(r.slot))];
    return r.dim >= 0 && r.dim < static_cast<int>(f.size()) ? f[r.dim] : Flags{true, false};
  }
  bool in_bounded(const StageOp& op, int slot) const {
    return bounded_[static_cast<size_t>(op.in.at(slot))];
  }

  // Whether the summand of combined input axis c may count the piece.
  bool exposes(size_t i, AxisRef c) const {
    const StageOp& op = stage_.ops[i];
    if (op.op == "max") return false;       // a max of repeated values is one of them
    if (op.op == "layernorm") return true;  // (x - mean)^2 repeats the mean's square
    if (op.op == "softmax" || op.op == "log_softmax")
      return !flag(op, c).d || in_bounded(op, c.slot);  // exp(x - max x)
    bool v = flag(op, c).v, bounded = in_bounded(op, c.slot);
    if (op.op == "matmul") {  // the summand is a product: one varying factor suffices
      for (auto [a, b] : axes_[i].pairs)
        for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}})
          if (same(x, c) && y.slot < static_cast<int>(op.in.size()) && y.slot != c.slot) {
            v = v || flag(op, y).v;
            bounded = bounded && in_bounded(op, y.slot);
          }
    }
    return !v || bounded;
  }

  // The flags of each input along output axis `out` (constant when unrelated).
  std::vector<Flags> inputs_along(size_t i, AxisRef out) const {
    const StageOp& op = stage_.ops[i];
    const int n_in = static_cast<int>(op.in.size());
    std::vector<Flags> in(op.in.size(), kConstant);
    std::vector<bool> seen(op.in.size(), false);
    auto merge = [&](AxisRef r) {
      if (r.slot >= n_in) return;
      Flags f = flag(op, r);
      Flags& m = in[static_cast<size_t>(r.slot)];
      m = seen[r.slot] ? Flags{m.d || f.d, m.v && f.v} : f;
      seen[r.slot] = true;
    };
    for (auto [a, b] : axes_[i].pairs) {
      if (same(a, out)) merge(b);
      if (same(b, out)) merge(a);
    }
    for (const auto& [whole, factors] : axes_[i].products) {
      if (same(whole, out))
        for (AxisRef f : factors) merge(f);
      for (AxisRef f : factors)
        if (same(f, out)) merge(whole);
    }
    return in;
  }

  Flags apply(Kind k, size_t i, const std::vector<Flags>& in, int dim, int rank) const {
    const StageOp& op = stage_.ops[i];
    bool any_d = false, all_v = !in.empty(), any_v = false;
    for (const Flags& f : in) {
      any_d = any_d || f.d;
      all_v = all_v && f.v;
      any_v = any_v || f.v;
    }
    switch (k) {
      case Kind::Add:
        return {any_d, all_v};
      case Kind::Mul:
        return {any_d, any_v};
      case Kind::Div:
        return {any_d, in.size() == 2 && in[0].v && !in[1].d};
      case Kind::Reciprocal:
      case Kind::Compare:
        return {any_d, false};
      case Kind::Call:
        return {any_d, any_d};
      case Kind::Constant:
        return kConstant;
      case Kind::Iota:
        return dim == dim_attr(op, static_cast<size_t>(rank)) ? kVarying : kConstant;
      case Kind::Where:
        return {any_d, in.size() == 3 && in[1].v && in[2].v};
      case Kind::Select: {
        const bool embedding = op.op == "embedding";
        const int index = embedding ? 0 : 1, data = 1 - index;
        const size_t data_rank = in_tensor(stage_, op, data).full_shape.size();
        const int rows = embedding ? 0 : dim_attr(op, data_rank);
        const Flags picked = flag(op, {data, rows});
        return {any_d, in[data].v || (in[index].d && picked.v)};
      }
      case Kind::LogSoftmax:
        return dim == dim_attr(op, static_cast<size_t>(rank)) ? Flags{any_d, false} : in.at(0);
      case Kind::LayerNorm:
        return {any_d, dim == rank - 1 && in.size() == 3 && in[1].v && in[2].v};
      case Kind::Opaque:
        return {true, false};
    }
    return {true, false};
  }

  bool bounded_of(Kind k, size_t i) const {
    const StageOp& op = stage_.ops[i];
    auto all = [&](size_t from, size_t to) {
      bool b = true;
      for (size_t s = from; s < to && s < op.in.size(); ++s) b = b && in_bounded(op, int(s));
      return b;
    };
    switch (k) {
      case Kind::Compare:
        return true;
      case Kind::Constant:
        return true;
      case Kind::Where:
        return all(1, 3);
      case Kind::Select:
        return in_bounded(op, op.op == "embedding" ? 1 : 0);
      case Kind::Add:
      case Kind::Mul:
      case Kind::Div:
      case Kind::Reciprocal:
      case Kind::Call:
        if (op.op == "sum" || op.op == "mean" || op.op == "matmul" || op.op == "softmax" ||
            op.op == "rmsnorm")
          return false;  // a count, or continuous
        return all(0, op.in.size());
      default:
        return false;
    }
  }

  void run(size_t i) {
    const StageOp& op = stage_.ops[i];
    const Kind k = kind_of(stage_, op);
    const int n_in = static_cast<int>(op.in.size());
    for (size_t o = 0; o < op.out.size(); ++o) {
      const size_t t = static_cast<size_t>(op.out[o]);
      const int rank = static_cast<int>(stage_.tensors[t].full_shape.size());
      std::vector<Flags> out(static_cast<size_t>(rank));
      for (int e = 0; e < rank; ++e)
        out[e] = apply(k, i, inputs_along(i, {n_in + static_cast<int>(o), e}), e, rank);
      flags_[t] = std::move(out);
      bounded_[t] = bounded_of(k, i);
    }
  }

  const Stage& stage_;
  const std::vector<OpAxes>& axes_;
  std::vector<std::vector<Flags>> flags_;
  std::vector<bool> bounded_;
};

}  // namespace

std::vector<std::pair<int, int>> count_exposing_axes(const Stage& stage,
                                                     const std::vector<OpAxes>& axes) {
  return Variation(stage, axes).exposing();
}

}  // namespace shardproof::reduction
