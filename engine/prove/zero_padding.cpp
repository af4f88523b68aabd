#include "engine/prove/zero_padding.h"

#include <algorithm>
#include <set>

#include "engine/ops/op_helpers.h"

namespace shardproof {
namespace {

using Flags = std::vector<char>;

// Elementwise ops whose result is 0 where all their (zero-padded) operands
// are 0; `where` only looks at its two branches.
const std::set<std::string> kZeroWhenAllZero = {"add",  "sub",    "maximum",    "minimum",
                                                "neg",  "square", "scale",      "relu",
                                                "cast", "send",   "all_reduce", "broadcast"};
// Elementwise ops with no zero to keep (an uninterpreted function's value
// at 0 is any value; a comparison of zeros may be true) but no domain
// either: every kept position still holds the reduced value.
const std::set<std::string> kNoZero = {"exp",     "log", "sqrt", "rsqrt", "tanh",
                                       "sigmoid", "erf", "gelu", "silu",  "map",
                                       "eq",      "lt",  "le",   "gt",    "ge"};

std::string describe_attrs(const AttrMap& attrs) {
  std::string s;
  for (const auto& [k, v] : attrs) s += k + "=" + v.describe() + ";";
  return s;
}

class Padding {
 public:
  Padding(const Stage& full, const Stage& reduced)
      : full_(full), s_(reduced), zero_(reduced.tensors.size()) {}

  ZeroPadding run() {
    ZeroPadding out;
    if (full_.ops.size() != s_.ops.size() || full_.tensors.size() != s_.tensors.size()) {
      out.refusal = "the reduced stage does not match the full one";
      return out;
    }
    for (const std::optional<ValueMap>& m : s_.value_maps)
      if (m) {
        out.refusal = "integers name positions on a line (their values are not lifted as zeros)";
        return out;
      }
    // In the order evaluate_stage runs (stage_eval.h).
    for (size_t t = 0; t < s_.tensors.size(); ++t)
      if (!s_.tensors[t].parallel && s_.tensors[t].free) leaf(static_cast<int>(t));
    if (!run_ops(false) || !parallel_inputs() || !run_ops(true)) {
      out.refusal = refusal_;
      return out;
    }
    out.zero = std::move(zero_);
    return out;
  }

 private:
  bool whole(int t, size_t d) const {
    return s_.tensors[t].shape[d] == s_.tensors[t].full_shape[d];
  }
  bool whole(int t) const {
    for (size_t d = 0; d < s_.tensors[t].shape.size(); ++d)
      if (!whole(t, d)) return false;
    return true;
  }
  // Flags of t: `f` on its reduced dims, true on the dims kept whole.
  void set(int t, Flags f) {
    f.resize(s_.tensors[t].shape.size(), 0);
    for (size_t d = 0; d < f.size(); ++d) f[d] = f[d] || whole(t, d);
    zero_[t] = std::move(f);
  }
  void set_all(int t, bool z) { set(t, Flags(s_.tensors[t].shape.size(), z)); }

  // Real leaves are lifted with zeros; integers and booleans repeat.
  void leaf(int t) { set_all(t, dclass_of(s_.tensors[t].dtype) == DClass::Real); }

  bool refuse(const StageOp& op, const std::string& why) {
    refusal_ = (op.display_name.empty() ? op.op : op.display_name) + " (" + op.op + ") " + why;
    return false;
  }

  // Whether operand k is 0 off the kept positions of output o's dim d
  // (NumPy broadcasting: a dim k lacks or holds once repeats its values).
  bool along(int k, int o, size_t d) const {
    const StageTensor &in = s_.tensors[k], &out = s_.tensors[o];
    const size_t offset = out.shape.size() - std::min(out.shape.size(), in.shape.size());
    if (d < offset) return whole(o, d);
    const size_t dk = d - offset;
    if (in.full_shape[dk] == 1 && out.full_shape[d] != 1) return whole(o, d);
    return zero_[k][dk];
  }
  Flags elementwise(const StageOp& op, const std::vector<int>& operands, bool any) const {
    const int o = op.out[0];
    Flags f(s_.tensors[o].shape.size(), any ? 0 : 1);
    for (size_t d = 0; d < f.size(); ++d)
      for (int k : operands) f[d] = any ? (f[d] || along(k, o, d)) : (f[d] && along(k, o, d));
    return f;
  }

  bool parallel_inputs() {
    for (size_t t = 0; t < s_.tensors.size(); ++t) {
      const StageTensor& st = s_.tensors[t];
      if (!st.parallel || !st.free) continue;
      if (!st.of || st.logical_index < 0 || zero_[st.logical_index].size() != st.shape.size()) {
        refusal_ = st.name + " is a stage input without a claim of the same rank";
        return false;
      }
      Flags f = zero_[st.logical_index];
      // A part other than the last is its own leaves; the last is the
      // slice minus them: zero where both are, for real parts.
      if (st.of->has_part && st.of->part_k != st.of->part_n - 1) f.assign(f.size(), 1);
      if (st.of->has_part && dclass_of(st.dtype) != DClass::Real) f.assign(f.size(), 0);
      set(static_cast<int>(t), f);
    }
    return true;
  }

  bool run_ops(bool parallel) {
    for (size_t i = 0; i < s_.ops.size(); ++i) {
      const StageOp& op = s_.ops[i];
      if (op.parallel != parallel) continue;
      if (!apply(op, full_.ops[i])) return false;
      for (int t : op.out)
        if (zero_[t].size() != s_.tensors[t].shape.size())
          return refuse(op, "has an output this check does not follow");
    }
    return true;
  }

  bool apply(const StageOp& op, const StageOp& full_op) {
    const std::string& n = op.op;
    if (op.out.empty()) return true;
    for (int t : op.in)
      if (zero_[t].size() != s_.tensors[t].shape.size())
        return refuse(op, "reads a tensor computed after it");
    const int o = op.out[0];
    if (kZeroWhenAllZero.count(n)) {
      // A collective's outputs are all the one combination of its operands.
      const Flags f = elementwise(op, op.in, false);
      for (int out : op.out) set(out, f);
      return true;
    }
    if (n == "mul") {
      set(o, elementwise(op, op.in, true));
      return true;
    }
    if (n == "where") {
      set(o, elementwise(op, {op.in[1], op.in[2]}, false));
      return true;
    }
    if (n == "pow") {
      set(o, ops::attr_int(op.attrs, "exponent") >= 1 ? elementwise(op, op.in, false) : Flags{});
      return true;
    }
    if (kNoZero.count(n)) {
      set_all(o, false);
      return true;
    }
    if (n == "div") {
      // A zero lifted into a denominator would leave the plan's domain.
      if (!whole(op.in[1])) return refuse(op, "divides by a tensor with a reduced line");
      set(o, elementwise(op, {op.in[0]}, false));
      return true;
    }
    if (n == "reciprocal") {
      if (!whole(op.in[0])) return refuse(op, "divides by a tensor with a reduced line");
      set_all(o, false);
      return true;
    }
    if (n == "sum" || n == "mean" || n == "max") return combine(op);
    if (n == "matmul") return matmul(op);
    if (n == "slice" || n == "split") {
      for (int out : op.out) set(out, zero_[op.in[0]]);
      return true;
    }
    if (n == "concat" || n == "all_gather") {
      Flags f(s_.tensors[o].shape.size(), 1);
      for (int k : op.in)
        for (size_t d = 0; d < f.size() && d < zero_[k].size(); ++d) f[d] = f[d] && zero_[k][d];
      for (int out : op.out) set(out, f);
      return true;
    }
    if (n == "transpose") {
      const std::vector<int64_t> perm = ops::attr_ints(op.attrs, "perm");
      const int64_t rank = static_cast<int64_t>(perm.size());
      Flags f(perm.size(), 0);
      for (size_t d = 0; d < perm.size(); ++d) f[d] = zero_[op.in[0]][(perm[d] + rank) % rank];
      set(o, f);
      return true;
    }
    if (n == "expand") {
      Flags f(s_.tensors[o].shape.size(), 0);
      for (size_t d = 0; d < f.size(); ++d) f[d] = along(op.in[0], o, d);
      set(o, f);
      return true;
    }
    if (n == "reshape") {
      // Kept positions of a product line are the products of its factors'
      // kept positions: a tensor zero off every kept position stays so.
      const Flags& in = zero_[op.in[0]];
      set_all(o, std::all_of(in.begin(), in.end(), [](char z) { return z != 0; }));
      return true;
    }
    if (n == "const") {
      const auto value = op.attrs.find("value"), full_value = full_op.attrs.find("value");
      if (value == op.attrs.end() || full_value == full_op.attrs.end() ||
          value->second.describe() != full_value->second.describe())
        return refuse(op, "has a value the reduction rewrote");
      set_all(o, value->second.kind == Attr::Kind::Number && value->second.number == 0);
      return true;
    }
    // Any other op is exact only on lines kept whole, with the attributes
    // it has at full size.
    for (int t : op.in)
      if (!whole(t)) return refuse(op, "reads a reduced line");
    for (int t : op.out)
      if (!whole(t)) return refuse(op, "writes a reduced line");
    if (describe_attrs(op.attrs) != describe_attrs(full_op.attrs))
      return refuse(op, "has attributes the reduction rewrote");
    for (int t : op.out) set_all(t, true);
    return true;
  }

  // sum and mean add the zeros off the kept positions (a mean divides by
  // its full count at both sizes); a maximum would see them.
  bool combine(const StageOp& op) {
    const int in = op.in[0], o = op.out[0];
    std::vector<bool> dims;
    if (!ops::reduced_dims(op.op, op.attrs, s_.tensors[in].shape, dims).empty())
      return refuse(op, "has dims it cannot reduce");
    Flags f;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d]) {
        const bool ok = op.op == "max" ? whole(in, d) : zero_[in][d] != 0;
        if (!ok)
          return refuse(op, "combines dim " + std::to_string(d) +
                                ", a reduced line its operand is not zero off");
        if (ops::attr_bool(op.attrs, "keepdim")) f.push_back(1);
      } else {
        f.push_back(zero_[in][d]);
      }
    }
    set(o, f);
    return true;
  }

  bool matmul(const StageOp& op) {
    const int a = op.in[0], b = op.in[1], o = op.out[0];
    const size_t ra = s_.tensors[a].shape.size(), rb = s_.tensors[b].shape.size();
    const size_t ro = s_.tensors[o].shape.size();
    const bool ta = ops::attr_bool(op.attrs, "transpose_a");
    const bool tb = ops::attr_bool(op.attrs, "transpose_b");
    const size_t am = ra - (ta ? 1 : 2), ak = ra - (ta ? 2 : 1);
    const size_t bk = rb - (tb ? 1 : 2), bn = rb - (tb ? 2 : 1);
    if (!whole(a, ak) && !zero_[a][ak] && !zero_[b][bk])
      return refuse(op, "contracts a reduced line neither operand is zero off");
    Flags f(ro, 0);
    const size_t batch = ro - 2;
    for (size_t j = 0; j < batch; ++j) {
      auto zero_in = [&](int t, size_t rank) {
        const size_t offset = batch - std::min(batch, rank - 2);
        if (j < offset) return false;
        const size_t jt = j - offset;
        return s_.tensors[t].full_shape[jt] == s_.tensors[o].full_shape[j] && zero_[t][jt];
      };
      f[j] = zero_in(a, ra) || zero_in(b, rb);
    }
    f[batch] = zero_[a][am];
    f[batch + 1] = zero_[b][bn];
    set(o, f);
    return true;
  }

  const Stage& full_;
  const Stage& s_;
  std::vector<Flags> zero_;
  std::string refusal_;
};

}  // namespace

ZeroPadding zero_padding(const Stage& full, const Stage& reduced) {
  return Padding(full, reduced).run();
}

}  // namespace shardproof
