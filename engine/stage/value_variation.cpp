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
bool makes_zero(const StageOp& op, Kind k, const std::vector<bool>& in_zero, bool cancel) {
  bool all = !in_zero.empty(), any = false;
  for (bool z : in_zero) all = all && z, any = any || z;
  switch (k) {
    case Kind::Constant:
      if (cancel) return op.op == "sub" || op.op == "lt" || op.op == "gt";
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

// Element maps (docs/soundness.md, section 3.2, "Equal values by another
// path"): for a tensor of at most kMaxMapped elements, each element as
// (root tensor, flat index in it), following the ops that only move
// values (reshape, transpose, slice, concat, split, expand, send,
// all_gather, broadcast) and plain claims; any other op's output is its own
// root. Two elements with equal entries hold equal values, whatever path
// computed them, so `sub(x, reshape(reshape(x)))` cancels like `sub(x, x)`.
using ElemMap = std::optional<std::vector<int64_t>>;
constexpr int64_t kMaxMapped = 1 << 16;

int64_t entry(int64_t root, int64_t index) { return (root << 32) | index; }

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (int d = int(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

int64_t count_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// For every flat position of `out` (row-major), `index(coords)` gives the
// flat position in the source map, or -1 when there is none.
template <class F>
ElemMap gathered(const Shape& out, const std::vector<int64_t>& src, F index) {
  const int64_t n = count_of(out);
  if (n > kMaxMapped) return std::nullopt;
  std::vector<int64_t> m(static_cast<size_t>(n));
  std::vector<int64_t> c(out.size(), 0);
  for (int64_t f = 0; f < n; ++f) {
    const int64_t at = index(c);
    if (at < 0 || at >= static_cast<int64_t>(src.size())) return std::nullopt;
    m[static_cast<size_t>(f)] = src[static_cast<size_t>(at)];
    for (int d = int(out.size()) - 1; d >= 0; --d) {
      if (++c[d] < out[d]) break;
      c[d] = 0;
    }
  }
  return m;
}

// `src` (of shape `from`) broadcast NumPy-style to `to`.
ElemMap broadcast_map(const std::vector<int64_t>& src, const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return std::nullopt;
  const size_t lead = to.size() - from.size();
  const std::vector<int64_t> st = strides_of(from);
  return gathered(to, src, [&](const std::vector<int64_t>& c) {
    int64_t at = 0;
    for (size_t d = 0; d < from.size(); ++d) at += (from[d] == 1 ? 0 : c[lead + d]) * st[d];
    return at;
  });
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
  void map_output(size_t i);
  int cancelled(size_t i) const;
  void claims_from_logical();

  const Stage& stage_;
  const std::vector<OpAxes>& axes_;
  std::vector<std::vector<Flags>> flags_;
  std::vector<bool> bounded_, zero_;
  std::vector<Atoms> leaves_;
  std::vector<ElemMap> maps_;
};

Variation::Variation(const Stage& stage, const std::vector<OpAxes>& axes)
    : stage_(stage),
      axes_(axes),
      flags_(stage.tensors.size()),
      bounded_(stage.tensors.size()),
      zero_(stage.tensors.size()),
      leaves_(stage.tensors.size()),
      maps_(stage.tensors.size()) {
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (st.free && !st.parallel && count_of(st.full_shape) <= kMaxMapped) {
      std::vector<int64_t> m(static_cast<size_t>(count_of(st.full_shape)));
      for (size_t f = 0; f < m.size(); ++f) m[f] = entry(int64_t(t), int64_t(f));
      maps_[t] = std::move(m);
    }
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
    const ElemMap& lm = maps_[static_cast<size_t>(st.logical_index)];
    const Shape& ls = stage_.tensors[static_cast<size_t>(st.logical_index)].full_shape;
    if (lm && !st.of->has_part && !st.of->scaled() && st.of->over.empty() &&
        st.of->slice.size() == ls.size()) {
      const std::vector<int64_t> lst = strides_of(ls);
      maps_[t] = gathered(st.full_shape, *lm, [&](const std::vector<int64_t>& c) {
        int64_t at = 0;
        for (size_t d = 0; d < c.size(); ++d) at += (c[d] + st.of->slice[d].first) * lst[d];
        return at;
      });
    }
    if (!maps_[t] && count_of(st.full_shape) <= kMaxMapped) {  // a part, a scaled claim: a root
      std::vector<int64_t> own(static_cast<size_t>(count_of(st.full_shape)));
      for (size_t f = 0; f < own.size(); ++f) own[f] = entry(int64_t(t), int64_t(f));
      maps_[t] = std::move(own);
    }
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

// The element maps of op i's outputs (see ElemMap): data movement keeps
// its operands' entries, every other op's output is a root of its own.
void Variation::map_output(size_t i) {
  const StageOp& op = stage_.ops[i];
  auto in_map = [&](size_t slot) -> const ElemMap& { return maps_[size_t(op.in.at(slot))]; };
  auto in_shape = [&](size_t slot) -> const Shape& { return in_tensor(stage_, op, slot).full_shape; };
  auto int_attr = [&](const char* name, int64_t dflt) {
    auto it = op.attrs.find(name);
    return it != op.attrs.end() && it->second.is_int() ? it->second.as_int() : dflt;
  };
  // Concatenation of operands [from, to) along dim (concat, all_gather).
  auto concat = [&](size_t from, size_t to, const Shape& out) -> ElemMap {
    const int rank = int(out.size());
    int64_t dim = int_attr("dim", 0);
    if (dim < 0) dim += rank;
    if (dim < 0 || dim >= rank) return std::nullopt;
    std::vector<int64_t> all, offsets;
    std::vector<std::vector<int64_t>> st;
    std::vector<int64_t> lo;
    int64_t at = 0;
    for (size_t s = from; s < to; ++s) {
      if (!in_map(s) || in_shape(s).size() != out.size()) return std::nullopt;
      offsets.push_back(int64_t(all.size()));
      all.insert(all.end(), in_map(s)->begin(), in_map(s)->end());
      st.push_back(strides_of(in_shape(s)));
      lo.push_back(at);
      at += in_shape(s)[size_t(dim)];
    }
    return gathered(out, all, [&](const std::vector<int64_t>& c) -> int64_t {
      size_t k = lo.size() - 1;
      while (k > 0 && c[size_t(dim)] < lo[k]) --k;
      int64_t f = offsets[k];
      for (size_t d = 0; d < c.size(); ++d)
        f += (d == size_t(dim) ? c[d] - lo[k] : c[d]) * st[k][d];
      return f;
    });
  };
  for (size_t o = 0; o < op.out.size(); ++o) {
    const size_t t = size_t(op.out[o]);
    const Shape& out = stage_.tensors[t].full_shape;
    ElemMap m;
    const std::string& n = op.op;
    if (op.in.empty() || count_of(out) > kMaxMapped) {
      m = std::nullopt;
    } else if ((n == "reshape" || n == "send") && in_map(0)) {
      if (count_of(out) == int64_t(in_map(0)->size())) m = in_map(0);
    } else if (n == "transpose" && in_map(0)) {
      auto it = op.attrs.find("perm");
      if (it != op.attrs.end() && it->second.is_int_list()) {
        const std::vector<int64_t> perm = it->second.as_int_list();
        const std::vector<int64_t> st = strides_of(in_shape(0));
        if (perm.size() == out.size())
          m = gathered(out, *in_map(0), [&](const std::vector<int64_t>& c) {
            int64_t f = 0;
            for (size_t d = 0; d < c.size(); ++d) f += c[d] * st[size_t(perm[d])];
            return f;
          });
      }
    } else if ((n == "slice" || n == "split") && in_map(0)) {
      const int rank = int(out.size());
      int64_t dim = int_attr("dim", 0);
      if (dim < 0) dim += rank;
      int64_t start = 0;
      if (n == "slice") {
        start = int_attr("start", 0);
        if (start < 0) start += in_shape(0)[size_t(dim)];
      } else {
        auto it = op.attrs.find("sizes");
        if (it != op.attrs.end() && it->second.is_int_list()) {
          const std::vector<int64_t> sizes = it->second.as_int_list();
          for (size_t k = 0; k < o && k < sizes.size(); ++k) start += sizes[k];
        }
      }
      const std::vector<int64_t> st = strides_of(in_shape(0));
      if (dim >= 0 && dim < rank && in_shape(0).size() == out.size())
        m = gathered(out, *in_map(0), [&](const std::vector<int64_t>& c) {
          int64_t f = 0;
          for (size_t d = 0; d < c.size(); ++d) f += (c[d] + (int64_t(d) == dim ? start : 0)) * st[d];
          return f;
        });
    } else if (n == "expand" && in_map(0)) {
      m = broadcast_map(*in_map(0), in_shape(0), out);
    } else if (n == "concat") {
      m = concat(0, op.in.size(), out);
    } else if (n == "all_gather") {
      m = concat(0, op.in.size(), out);
    } else if (n == "broadcast") {
      const int64_t root = int_attr("root", 0);
      if (root >= 0 && root < int64_t(op.in.size()) && maps_[size_t(op.in[size_t(root)])])
        m = maps_[size_t(op.in[size_t(root)])];
    }
    if (!m && count_of(out) <= kMaxMapped) {  // a root of its own
      std::vector<int64_t> own(size_t(count_of(out)));
      for (size_t f = 0; f < own.size(); ++f) own[f] = entry(int64_t(t), int64_t(f));
      m = std::move(own);
    }
    if (m && int64_t(m->size()) != count_of(out)) m = std::nullopt;
    maps_[t] = std::move(m);
  }
}

// Whether the operands of op i (a difference, quotient or comparison)
// hold equal values: 0 nowhere known, 1 at some elements, 2 at all.
int Variation::cancelled(size_t i) const {
  const StageOp& op = stage_.ops[i];
  static const std::set<std::string> ops = {"sub", "div", "eq", "lt", "le", "gt", "ge"};
  if (op.in.size() != 2 || op.out.size() != 1 || ops.count(op.op) == 0) return 0;
  if (op.in[0] == op.in[1]) return 2;
  const ElemMap &a = maps_[size_t(op.in[0])], &b = maps_[size_t(op.in[1])];
  if (!a || !b) return 0;
  const Shape& out = stage_.tensors[size_t(op.out[0])].full_shape;
  ElemMap x = broadcast_map(*a, in_tensor(stage_, op, 0).full_shape, out);
  ElemMap y = broadcast_map(*b, in_tensor(stage_, op, 1).full_shape, out);
  if (!x || !y || x->size() != y->size()) return 0;
  size_t equal = 0;
  for (size_t f = 0; f < x->size(); ++f) equal += (*x)[f] == (*y)[f];
  return equal == 0 ? 0 : equal == x->size() ? 2 : 1;
}

void Variation::run(size_t i) {
  const StageOp& op = stage_.ops[i];
  // Operands equal at every element cancel as `sub(x, x)` does; equal at
  // some only, the value may be constant there: never v, never n.
  const int cancel = cancelled(i);
  const Kind own = kind_of(stage_, op);
  const Kind k = cancel == 2 ? Kind::Constant : cancel == 1 ? Kind::Opaque : own;
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
    bounded_[t] = bounded_of(cancel == 1 ? own : k, i);  // a comparison stays an indicator
    zero_[t] = makes_zero(op, k, in_zero, cancel == 2);
    leaves_[t] = atom ? Atoms{static_cast<int>(t)} : leaves;
  }
  map_output(i);
}

}  // namespace

std::vector<std::pair<int, int>> count_exposing_axes(const Stage& stage,
                                                     const std::vector<OpAxes>& axes) {
  return Variation(stage, axes).exposing();
}

}  // namespace shardproof::reduction
