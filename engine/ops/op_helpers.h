// Shared helpers for operator definitions: attribute checking, dimension
// normalisation, broadcasting, elementwise/reduction loops, axis relations.
// Internal to engine/ops and op_registry.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/ops/op_def.h"
#include "engine/ops/op_registry.h"

namespace shardproof::ops {

// One call per file under engine/ops/, from OpRegistry::instance().
void register_elementwise_ops(OpRegistry& r);
void register_constant_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduction_ops(OpRegistry& r);
void register_matmul_ops(OpRegistry& r);
void register_composite_ops(OpRegistry& r);
void register_indexing_ops(OpRegistry& r);
void register_optimizer_ops(OpRegistry& r);
void register_collective_ops(OpRegistry& r);

// ---------------------------------------------------------------- attributes

enum class AttrType { Int, IntList, Bool, String, Number };
struct AttrRule {
  std::string name;
  AttrType type;
  bool required;
};

// Unknown keys, missing required keys and wrong types; "" when all is well.
std::string check_attrs(const std::string& op, const AttrMap& attrs,
                        const std::vector<AttrRule>& rules);

// Accessors after check_attrs; `def` when the attribute is absent.
int64_t attr_int(const AttrMap& attrs, const std::string& key, int64_t def = 0);
std::vector<int64_t> attr_ints(const AttrMap& attrs, const std::string& key);
bool attr_bool(const AttrMap& attrs, const std::string& key, bool def = false);
Rational attr_number(const AttrMap& attrs, const std::string& key, const Rational& def = 0);
std::string attr_string(const AttrMap& attrs, const std::string& key, const std::string& def = "");

// ---------------------------------------------------------------- operands

std::string describe(const TensorInfo& t);  // "f32 [8, 16]"
std::string check_input_count(const std::string& op, const std::vector<TensorInfo>& in,
                              size_t expected);
std::string check_output_count(const std::string& op, size_t n_out, size_t expected);

enum class Allowed { Real, Numeric, Any };  // Numeric: real or integer
// "exp: input 0 must be real (exp on integers is invalid), found i64 [4]"
std::string check_class(const std::string& op, const std::vector<TensorInfo>& in, size_t index,
                        Allowed allowed);
// Operands first..end-1 must share one dtype class.
std::string check_same_class(const std::string& op, const std::vector<TensorInfo>& in,
                             size_t first = 0);
std::string check_same_shape(const std::string& op, const std::vector<TensorInfo>& in,
                             size_t first = 0);

// A dim attribute counted from the end when negative; "" or an error.
std::string normalize_dim(const std::string& op, const std::string& attr, int64_t dim,
                          const Shape& shape, int& out);
// `dims` (default: all) as a per-dim flag; rejects duplicates and empties.
std::string reduced_dims(const std::string& op, const AttrMap& attrs, const Shape& shape,
                         std::vector<bool>& reduced);
// NumPy broadcasting of several shapes.
std::string broadcast_shapes(const std::string& op, const std::vector<Shape>& shapes, Shape& out);
Shape reduce_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim);

// Product of the full (pre-reduction) sizes of the reduced dims: the divisor
// of every mean. Throws std::logic_error when the caller gave no full shapes.
int64_t full_count(const OpCall& call, size_t input, const std::vector<bool>& reduced);

// The declared output shape, or the `shape` attribute when the caller gave
// none (reshape, expand, const, iota).
Shape out_shape_of(const OpCall& call);

// ---------------------------------------------------------------- tensors

template <class V>
Tensor<V> make_tensor(Shape shape, DClass cls, std::vector<V> data) {
  Tensor<V> t;
  t.shape = std::move(shape);
  t.cls = cls;
  t.data = std::move(data);
  return t;
}

// Flat offset in `in` of the element that broadcasts to out_index.
int64_t broadcast_offset(const Shape& in, const Shape& out, const std::vector<int64_t>& out_index);

// out[i] = f(args at i), with every operand broadcast to `out_shape`.
template <class V, class F>
Tensor<V> elementwise(const std::vector<const Tensor<V>*>& ins, const Shape& out_shape, DClass cls,
                      F&& f) {
  std::vector<V> data;
  const int64_t n = element_count(out_shape);
  data.reserve(n);
  std::vector<V> args;
  for (int64_t flat = 0; flat < n; ++flat) {
    std::vector<int64_t> index = unflatten(out_shape, flat);
    args.clear();
    for (const Tensor<V>* t : ins)
      args.push_back(t->data[broadcast_offset(t->shape, out_shape, index)]);
    data.push_back(f(args));
  }
  return make_tensor(out_shape, cls, std::move(data));
}

template <class V, class F>
Tensor<V> map_tensor(const Tensor<V>& x, DClass cls, F&& f) {
  std::vector<V> data;
  data.reserve(x.data.size());
  for (const V& v : x.data) data.push_back(f(v));
  return make_tensor(x.shape, cls, std::move(data));
}

// Groups the elements of x by their position in the reduced output (in
// row-major order within a group) and folds each group with f(vector<V>).
template <class V, class F>
Tensor<V> reduce_tensor(const Tensor<V>& x, const std::vector<bool>& reduced, bool keepdim,
                        DClass cls, F&& f) {
  Shape kept = reduce_shape(x.shape, reduced, true);
  std::vector<std::vector<V>> groups(element_count(kept));
  for (int64_t flat = 0; flat < x.size(); ++flat) {
    std::vector<int64_t> index = unflatten(x.shape, flat);
    for (size_t d = 0; d < index.size(); ++d)
      if (reduced[d]) index[d] = 0;
    groups[flat_index(kept, index)].push_back(x.data[flat]);
  }
  std::vector<V> data;
  data.reserve(groups.size());
  for (auto& g : groups) data.push_back(f(g));
  return make_tensor(reduce_shape(x.shape, reduced, keepdim), cls, std::move(data));
}

// Slices [lo, hi) along dim.
template <class V>
Tensor<V> slice_tensor(const Tensor<V>& x, int dim, int64_t lo, int64_t hi) {
  Shape shape = x.shape;
  shape[dim] = hi - lo;
  std::vector<V> data;
  data.reserve(element_count(shape));
  for (int64_t flat = 0; flat < element_count(shape); ++flat) {
    std::vector<int64_t> index = unflatten(shape, flat);
    index[dim] += lo;
    data.push_back(x.at(index));
  }
  return make_tensor(shape, x.cls, std::move(data));
}

// Concatenation along dim (shapes agree elsewhere).
template <class V>
Tensor<V> concat_tensors(const std::vector<const Tensor<V>*>& parts, int dim) {
  Shape shape = parts[0]->shape;
  shape[dim] = 0;
  for (const Tensor<V>* p : parts) shape[dim] += p->shape[dim];
  std::vector<V> data;
  data.reserve(element_count(shape));
  for (int64_t flat = 0; flat < element_count(shape); ++flat) {
    std::vector<int64_t> index = unflatten(shape, flat);
    size_t k = 0;
    while (index[dim] >= parts[k]->shape[dim]) index[dim] -= parts[k++]->shape[dim];
    data.push_back(parts[k]->at(index));
  }
  return make_tensor(shape, parts[0]->cls, std::move(data));
}

template <class V>
std::vector<const Tensor<V>*> pointers(const std::vector<Tensor<V>>& ts) {
  std::vector<const Tensor<V>*> out;
  for (const Tensor<V>& t : ts) out.push_back(&t);
  return out;
}

// ---------------------------------------------------------------- axes

// Non-broadcast dims of `in` (size > 1) are the same positions as the
// right-aligned dims of `out`.
void relate_broadcast(AxisRelations& rel, int in_slot, const Shape& in, int out_slot,
                      const Shape& out);
// Every input broadcast to every output.
void relate_all_broadcast(AxisRelations& rel, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out);
// Ops that move values without computing on them (shape ops, gathering
// collectives): integer positions keep their meaning from every input to
// every output.
void relate_moved_positions(AxisRelations& rel, size_t n_in, size_t n_out);

// ---------------------------------------------------------------- registration

// TemplateOpDef plus the optional members an Impl may provide:
//   static constexpr bool kCollective;
//   static void relate_axes(attrs, in, out, rel);
//   static AttrMap reduce_attrs(attrs, reduced_in, reduced_out, position);
//   static std::string take_declared_dtypes(attrs, declared, out);
template <class Impl>
class OpDefOf final : public TemplateOpDef<Impl> {
 public:
  bool collective() const override {
    if constexpr (requires { Impl::kCollective; })
      return Impl::kCollective;
    else
      return false;
  }
  void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                   const std::vector<TensorInfo>& out, AxisRelations& rel) const override {
    if constexpr (requires { Impl::relate_axes(attrs, in, out, rel); })
      Impl::relate_axes(attrs, in, out, rel);
    else
      OpDef::relate_axes(attrs, in, out, rel);
  }
  AttrMap reduce_attrs(const AttrMap& attrs, const std::vector<Shape>& reduced_in,
                       const std::vector<Shape>& reduced_out,
                       const PositionMap& position) const override {
    if constexpr (requires { Impl::reduce_attrs(attrs, reduced_in, reduced_out, position); })
      return Impl::reduce_attrs(attrs, reduced_in, reduced_out, position);
    else
      return OpDef::reduce_attrs(attrs, reduced_in, reduced_out, position);
  }
  std::string take_declared_dtypes(const AttrMap& attrs, const std::vector<TensorInfo>& declared,
                                   std::vector<TensorInfo>& out) const override {
    if constexpr (requires { Impl::take_declared_dtypes(attrs, declared, out); })
      return Impl::take_declared_dtypes(attrs, declared, out);
    else
      return OpDef::take_declared_dtypes(attrs, declared, out);
  }
};

template <class Impl>
void add_op(OpRegistry& r) {
  r.add(std::make_unique<OpDefOf<Impl>>());
}

}  // namespace shardproof::ops
