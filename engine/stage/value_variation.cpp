#include "engine/stage/value_variation.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <string>

namespace shardproof::reduction {
namespace {

// Sorted, distinct tensor ids: the *atoms* a value is built from (stage
// free tensors and outputs of uninterpreted functions and softmaxes, whose
// insides no other tensor can share), or those in a denominator.
using Atoms = std::vector<int>;

Atoms joined(const Atoms& a, const Atoms& b) {
  Atoms out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

bool meet(const Atoms& a, const Atoms& b) {
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

// Along one axis of a value (docs/soundness.md, section 3.2):
// d, it may depend on the position along the axis;
// v, every term of it does (none is repeated along the axis), and no
//    denominator that depends on the position could cancel a numerator;
// n, it is not constant along the axis (up to equal values held by
//    different tensors, section 7): an uninterpreted function of it then
//    varies too;
// den, the atoms of denominators that depend on the position: a product
//    with a factor built from one of them may cancel (x * (1 / x) = 1).
// A stage input has d, v and n; a constant or a broadcast operand none.
struct Flags {
  bool d = false, v = false, n = false;
  Atoms den;
};
const Flags kConstant{};
const Flags kVarying{true, true, true, {}};

// How an op's output terms follow from its operands' along one axis.
enum class Kind {
  Add,         // terms of every operand (sums, data movement): v if all are
  Clip,        // maximum, minimum, relu, max: as Add, but may be constant
  Mul,         // products: v if any factor's terms all vary and none cancel
  Div,         // a / b: v if a's terms vary and b is constant along the axis
  Reciprocal,  // 1 / x: never v
  Call,        // an uninterpreted function: v if its argument is not constant
  Compare,     // indicators (and floors): never v, e.g. eq(p, q) = 1 - p - q + 2pq
  Constant,    // const, and ops whose operands cancel: x - x, x / x, eq(x, x)
  Iota,        // its values along its dim, constant along the others
  Where,       // v if both branches are
  Select,      // embedding, gather: the row picked varies as the index does
  Softmax,     // exp(x - max) / sum along dim: an atom, not constant where x is not
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

bool attr_is_zero(const StageOp& op, const std::string& name) {
  auto it = op.attrs.find(name);
  return it != op.attrs.end() && it->second.kind == Attr::Kind::Number && it->second.number == 0;
}

Kind cast_kind(const Stage& s, const StageOp& op) {
  if (op.in.empty() || op.out.empty()) return Kind::Opaque;
  DClass from = dclass_of(in_tensor(s, op, 0).dtype);
  DClass to = dclass_of(s.tensors[static_cast<size_t>(op.out[0])].dtype);
  bool lossy =
      (to == DClass::Bool && from != DClass::Bool) || (to == DClass::Int && from == DClass::Real);
  return lossy ? Kind::Compare : Kind::Add;
}

Kind kind_of(const Stage& s, const StageOp& op) {
  static const std::set<std::string> add = {
      "add",    "sub", "neg",  "reshape",    "transpose",  "slice",     "concat", "split",
      "expand", "sum", "mean", "all_gather", "all_to_all", "broadcast", "send"};
  static const std::set<std::string> clip = {"maximum", "minimum", "relu", "max"};
  static const std::set<std::string> mul = {"mul", "matmul", "square", "rmsnorm"};
  static const std::set<std::string> call = {"exp",     "log", "sqrt", "rsqrt", "tanh",
                                             "sigmoid", "erf", "gelu", "silu",  "map"};
  static const std::set<std::string> compare = {"eq", "lt", "le", "gt", "ge"};
  const std::string& n = op.op;
  if (cancels(op)) return Kind::Constant;
  if (add.count(n)) return Kind::Add;
  if (clip.count(n)) return Kind::Clip;
  if (mul.count(n)) return Kind::Mul;
  if (call.count(n)) return Kind::Call;
  if (compare.count(n)) return Kind::Compare;
  if (n == "div") return Kind::Div;
  if (n == "reciprocal") return Kind::Reciprocal;
  if (n == "const") return Kind::Constant;
  if (n == "iota") return Kind::Iota;
  if (n == "where") return Kind::Where;
  if (n == "embedding" || n == "gather") return Kind::Select;
  if (n == "softmax") return Kind::Softmax;
  if (n == "log_softmax") return Kind::LogSoftmax;
  if (n == "layernorm") return Kind::LayerNorm;
  if (n == "all_reduce" || n == "reduce_scatter") {
    auto it = op.attrs.find("reduce");
    return it != op.attrs.end() && it->second.text == "max" ? Kind::Clip : Kind::Add;
  }
  if (n == "scale") return attr_is_zero(op, "factor") ? Kind::Constant : Kind::Add;
  if (n == "pow") return attr_is_zero(op, "exponent") ? Kind::Constant : Kind::Mul;
  if (n == "cast") return cast_kind(s, op);
  return Kind::Opaque;
}

// Whether the op's output is identically zero: a factor that makes a
// product constant (exp(x * (y - y)) = 1 at every position).
bool makes_zero(const StageOp& op, Kind k, const std::vector<bool>& in_zero) {
  bool all = !in_zero.empty(), any = false;
  for (bool z : in_zero) all = all && z, any = any || z;
  switch (k) {
    case Kind::Constant:
      if (cancels(op)) return op.op == "sub" || op.op == "lt" || op.op == "gt";
      return op.op == "scale" || (op.op == "const" && attr_is_zero(op, "value"));
    case Kind::Mul:
      return any;
    case Kind::Add:
    case Kind::Clip:
      return all;
    case Kind::Where:
      return in_zero.size() == 3 && in_zero[1] && in_zero[2];
    default:
      return false;
  }
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
  Variation(const Stage& stage, const std::vector<OpAxes>& axes);
  std::vector<std::pair<int, int>> exposing() const;

 private:
  Flags flag(const StageOp& op, AxisRef r) const {
    const std::vector<Flags>& f = flags_[static_cast<size_t>(op.in.at(r.slot))];
    return r.dim >= 0 && r.dim < static_cast<int>(f.size()) ? f[r.dim]
                                                            : Flags{true, false, false, {}};
  }
  bool in_bounded(const StageOp& op, int slot) const {
    return bounded_[static_cast<size_t>(op.in.at(slot))];
  }
  const Atoms& leaves_in(const StageOp& op, size_t slot) const {
    return leaves_[static_cast<size_t>(op.in.at(slot))];
  }
  bool exposes(size_t i, AxisRef c) const;
  bool may_cancel(const StageOp& op, const std::vector<Flags>& in) const;
  Atoms denominator(const StageOp& op, size_t slot, const Flags& f) const;
  std::vector<Flags> inputs_along(size_t i, AxisRef out) const;
  Flags apply(Kind k, size_t i, const std::vector<Flags>& in, int dim, int rank) const;
  Flags product(const StageOp& op, const std::vector<Flags>& in) const;
  Flags normalised(Kind k, const StageOp& op, const Flags& x, bool along_dim) const;
  bool bounded_of(Kind k, size_t i) const;
  void run(size_t i);
  void claims_from_logical();

  const Stage& stage_;
  const std::vector<OpAxes>& axes_;
  std::vector<std::vector<Flags>> flags_;
  std::vector<bool> bounded_, zero_;
  std::vector<Atoms> leaves_;
};

Variation::Variation(const Stage& stage, const std::vector<OpAxes>& axes)
    : stage_(stage),
      axes_(axes),
      flags_(stage.tensors.size()),
      bounded_(stage.tensors.size()),
      zero_(stage.tensors.size()),
      leaves_(stage.tensors.size()) {
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    flags_[t].assign(st.full_shape.size(), kConstant);
    if (st.free) leaves_[t] = {static_cast<int>(t)};
    if (st.free && !st.parallel) {
      flags_[t].assign(st.full_shape.size(), kVarying);
      // Booleans take two values; an integer is bounded too: an index input
      // is assumed to hold valid positions of the line it indexes, so a sum
      // of ids over a reduced line never reaches a capacity the full line
      // does (docs/soundness.md, section 3.2, "Saturation").
      bounded_[t] = dclass_of(st.dtype) != DClass::Real;
    }
  }
  for (size_t i = 0; i < stage.ops.size(); ++i)
    if (!stage.ops[i].parallel) run(i);
  claims_from_logical();
  for (size_t i = 0; i < stage.ops.size(); ++i)
    if (stage.ops[i].parallel) run(i);
}

// A plain claim is its logical slice; a part is free leaves, the last one
// the slice minus them. A claim shares its logical tensor's atoms.
void Variation::claims_from_logical() {
  for (size_t t = 0; t < stage_.tensors.size(); ++t) {
    const StageTensor& st = stage_.tensors[t];
    if (!st.free || !st.parallel) continue;
    if (!st.of || st.logical_index < 0 || flags_[st.logical_index].size() != st.full_shape.size()) {
      flags_[t].assign(st.full_shape.size(), kVarying);
      continue;
    }
    flags_[t] = flags_[st.logical_index];
    bounded_[t] = bounded_[st.logical_index] && !st.of->has_part;
    zero_[t] = zero_[st.logical_index] && !st.of->has_part;
    leaves_[t] = joined(leaves_[t], leaves_[st.logical_index]);
    if (st.of->has_part)
      for (Flags& f : flags_[t]) f.d = true;
  }
}

std::vector<std::pair<int, int>> Variation::exposing() const {
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

// Whether the summand of combined input axis c may count the piece.
bool Variation::exposes(size_t i, AxisRef c) const {
  const StageOp& op = stage_.ops[i];
  if (op.op == "max") return false;       // a max of repeated values is one of them
  if (op.op == "layernorm") return true;  // (x - mean)^2 repeats the mean's square
  if (op.op == "softmax" || op.op == "log_softmax")
    return !flag(op, c).n || in_bounded(op, c.slot);  // exp(x - max x)
  bool v = flag(op, c).v, bounded = in_bounded(op, c.slot);
  if (op.op == "matmul") {  // the summand is a product: one varying factor suffices
    for (auto [a, b] : axes_[i].pairs)
      for (auto [x, y] : {std::pair{a, b}, std::pair{b, a}})
        if (same(x, c) && y.slot < static_cast<int>(op.in.size()) && y.slot != c.slot) {
          std::vector<Flags> factors(op.in.size());
          factors[c.slot] = flag(op, c);
          factors[y.slot] = flag(op, y);
          v = (v || factors[y.slot].v) && !may_cancel(op, factors);
          bounded = bounded && in_bounded(op, y.slot);
        }
  }
  return !v || bounded;
}

// Whether one factor's position-dependent denominator shares an atom with
// another factor, so that the product may cancel to a constant.
bool Variation::may_cancel(const StageOp& op, const std::vector<Flags>& in) const {
  for (size_t a = 0; a < in.size(); ++a)
    for (size_t b = 0; b < in.size(); ++b)
      if (a != b && meet(in[a].den, leaves_in(op, b))) return true;
  return false;
}

// The atoms that dividing by operand `slot` puts in a denominator.
Atoms Variation::denominator(const StageOp& op, size_t slot, const Flags& f) const {
  return f.d ? joined(f.den, leaves_in(op, slot)) : f.den;
}

// The flags of each input along output axis `out` (constant when unrelated).
std::vector<Flags> Variation::inputs_along(size_t i, AxisRef out) const {
  const StageOp& op = stage_.ops[i];
  const int n_in = static_cast<int>(op.in.size());
  std::vector<Flags> in(op.in.size(), kConstant);
  std::vector<bool> seen(op.in.size(), false);
  auto merge = [&](AxisRef r) {
    if (r.slot >= n_in) return;
    Flags f = flag(op, r);
    Flags& m = in[static_cast<size_t>(r.slot)];
    m = seen[r.slot] ? Flags{m.d || f.d, m.v && f.v, m.n && f.n, joined(m.den, f.den)} : f;
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

// A product: it varies when one factor does and no denominator cancels; it
// is not constant when every factor that depends is not, none is zero and
// none cancels.
Flags Variation::product(const StageOp& op, const std::vector<Flags>& in) const {
  Flags out;
  bool all_n = true, any_n = false, any_zero = false;
  for (size_t s = 0; s < in.size(); ++s) {
    const Flags& f = in[s];
    out.d = out.d || f.d;
    out.v = out.v || f.v;
    out.den = joined(out.den, f.den);
    any_n = any_n || f.n;
    all_n = all_n && (f.n || !f.d);
    any_zero = any_zero || zero_[static_cast<size_t>(op.in[s])];
  }
  const bool cancel = may_cancel(op, in);
  out.v = out.v && !cancel;
  out.n = any_n && all_n && !any_zero && !cancel;
  return out;
}

// softmax and log_softmax. Along dim: exp(x - max) over its sum, not
// constant where x is not (log_softmax never varies: the log-sum-exp is
// repeated). Along the other axes the row's shift cancels (x + c(k) gives
// the same row), so only a value every term of which varies is not
// constant. Their outputs are atoms: nothing else holds their denominator.
Flags Variation::normalised(Kind k, const StageOp&, const Flags& x, bool along_dim) const {
  if (along_dim) return {x.d, k == Kind::Softmax && x.v, x.n, {}};
  return {x.d, x.v, x.v, {}};
}

Flags Variation::apply(Kind k, size_t i, const std::vector<Flags>& in, int dim, int rank) const {
  const StageOp& op = stage_.ops[i];
  Flags all{false, !in.empty(), false, {}};
  for (const Flags& f : in) {
    all.d = all.d || f.d;
    all.v = all.v && f.v;
    all.n = all.n || f.n;
    all.den = joined(all.den, f.den);
  }
  switch (k) {
    case Kind::Add:
      return {all.d, all.v, all.n && all.den.empty(), all.den};
    case Kind::Clip:
      return {all.d, all.v, false, all.den};
    case Kind::Mul:
      return product(op, in);
    case Kind::Div: {
      if (in.size() != 2) return {all.d, false, false, all.den};
      const bool n = in[0].n && !in[1].d && !zero_[static_cast<size_t>(op.in[0])];
      return {all.d, in[0].v && !in[1].d, n, joined(in[0].den, denominator(op, 1, in[1]))};
    }
    case Kind::Reciprocal:
      return {all.d, false, !in.empty() && in[0].n,
              in.empty() ? Atoms{} : denominator(op, 0, in[0])};
    case Kind::Call:
      return {all.d, all.n, all.n, {}};
    case Kind::Compare:
      return {all.d, false, false, {}};
    case Kind::Constant:
      return kConstant;
    case Kind::Iota:
      return dim == dim_attr(op, static_cast<size_t>(rank)) ? kVarying : kConstant;
    case Kind::Where: {
      if (in.size() != 3) return {all.d, false, false, all.den};
      const bool v = in[1].v && in[2].v, n = in[1].n && in[2].n;
      return {all.d, v, n && all.den.empty(), all.den};
    }
    case Kind::Select: {
      const bool embedding = op.op == "embedding";
      const int index = embedding ? 0 : 1, data = 1 - index;
      const size_t data_rank = in_tensor(stage_, op, data).full_shape.size();
      const int rows = embedding ? 0 : dim_attr(op, data_rank);
      const Flags picked = flag(op, {data, rows});
      const bool v = in[data].v || (in[index].d && picked.v);
      const bool n = in[data].n || (in[index].n && picked.n);
      return {all.d, v, n && picked.den.empty(), joined(in[data].den, picked.den)};
    }
    case Kind::Softmax:
    case Kind::LogSoftmax:
      return normalised(k, op, in.at(0), dim == dim_attr(op, static_cast<size_t>(rank)));
    case Kind::LayerNorm: {
      const bool v = dim == rank - 1 && in.size() == 3 && in[1].v && in[2].v && all.den.empty();
      return {all.d, v, v, all.den};
    }
    case Kind::Opaque: {
      Atoms den;
      for (size_t s = 0; s < in.size(); ++s) den = joined(den, denominator(op, s, in[s]));
      return {true, false, false, den};
    }
  }
  return {true, false, false, {}};
}

bool Variation::bounded_of(Kind k, size_t i) const {
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
    case Kind::Clip:
    case Kind::Mul:
    case Kind::Div:
    case Kind::Reciprocal:
    case Kind::Call:
      // A sum of bounded values is a count: bounded too (its combined line
      // keeps full size), and a later sum of counts may saturate as well.
      if (op.op == "rmsnorm") return false;  // continuous
      return all(0, op.in.size());
    default:
      return false;
  }
}

void Variation::run(size_t i) {
  const StageOp& op = stage_.ops[i];
  const Kind k = kind_of(stage_, op);
  const int n_in = static_cast<int>(op.in.size());
  std::vector<bool> in_zero;
  Atoms leaves;
  for (int t : op.in) {
    in_zero.push_back(zero_[static_cast<size_t>(t)]);
    leaves = joined(leaves, leaves_[static_cast<size_t>(t)]);
  }
  const bool atom = k == Kind::Call || k == Kind::Softmax || k == Kind::LogSoftmax;
  for (size_t o = 0; o < op.out.size(); ++o) {
    const size_t t = static_cast<size_t>(op.out[o]);
    const int rank = static_cast<int>(stage_.tensors[t].full_shape.size());
    std::vector<Flags> out(static_cast<size_t>(rank));
    for (int e = 0; e < rank; ++e)
      out[e] = apply(k, i, inputs_along(i, {n_in + static_cast<int>(o), e}), e, rank);
    flags_[t] = std::move(out);
    bounded_[t] = bounded_of(k, i);
    zero_[t] = makes_zero(op, k, in_zero);
    leaves_[t] = atom ? Atoms{static_cast<int>(t)} : leaves;
  }
}

}  // namespace

std::vector<std::pair<int, int>> count_exposing_axes(const Stage& stage,
                                                     const std::vector<OpAxes>& axes) {
  return Variation(stage, axes).exposing();
}

}  // namespace shardproof::reduction
