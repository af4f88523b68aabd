// Evaluates a stage on either algebra: the stage's free tensors get their
// values (logical ones from leaves, parallel ones from their lineage claims),
// then every op runs in order. The symbolic encoding and the concrete replay
// of a counterexample share this code, so they cannot drift apart.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/full_sizes.h"
#include "engine/ops/op_registry.h"
#include "engine/stage/stage.h"

namespace shardproof {

// Name of the leaf variable for element `flat` of logical free tensor `t`.
inline std::string logical_leaf_name(int t, int64_t flat) {
  return "L" + std::to_string(t) + "_" + std::to_string(flat);
}
// Name of the leaf variable for element `flat` of additive part tensor `t`.
inline std::string part_leaf_name(int t, int64_t flat) {
  return "P" + std::to_string(t) + "_" + std::to_string(flat);
}

// The stage tensor a leaf name above belongs to; -1 for another name.
inline int leaf_owner(const std::string& name) {
  if (name.size() < 2 || (name[0] != 'L' && name[0] != 'P')) return -1;
  return std::stoi(name.substr(1, name.find('_') - 1));
}

// Elements of logical tensor values `whole` inside `slice`, row-major.
template <class V>
Tensor<V> slice_of(const Tensor<V>& whole, const SliceSpec& slice) {
  Tensor<V> out;
  out.cls = whole.cls;
  for (auto& [lo, hi] : slice) out.shape.push_back(hi - lo);
  int64_t n = element_count(out.shape);
  out.data.reserve(n);
  std::vector<int64_t> index(slice.size());
  for (int64_t flat = 0; flat < n; ++flat) {
    std::vector<int64_t> local = unflatten(out.shape, flat);
    for (size_t d = 0; d < slice.size(); ++d) index[d] = local[d] + slice[d].first;
    out.data.push_back(whole.at(index));
  }
  return out;
}

// `values` times a scaled claim's factor (numerator, denominator); the
// values themselves when it is 1, so unscaled claims keep their terms.
template <class Alg>
Tensor<typename Alg::Value> scaled_by(Alg& alg, Tensor<typename Alg::Value> values,
                                      std::pair<int64_t, int64_t> scale) {
  if (scale == std::pair<int64_t, int64_t>{1, 1}) return values;
  const auto factor = alg.constant(Rational(scale.first) / scale.second, values.cls);
  for (auto& v : values.data) v = alg.mul(factor, v);
  return values;
}

template <class Alg>
using StageValues = std::vector<std::optional<Tensor<typename Alg::Value>>>;

// `leaf(name, cls)` gives the value of a named leaf variable; `after_op`,
// when given, is called after each op has run (the prover uses it to tell
// which op recorded an assumption).
template <class Alg>
StageValues<Alg> evaluate_stage(
    Alg& alg, const Stage& stage,
    const std::function<typename Alg::Value(const std::string&, DClass)>& leaf,
    const std::function<void(const StageOp&)>& after_op = {}) {
  using V = typename Alg::Value;
  StageValues<Alg> values(stage.tensors.size());
  // Logical free tensors first: parallel claims read them.
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (st.parallel || !st.free) continue;
    Tensor<V> tensor;
    tensor.shape = st.shape;
    tensor.cls = dclass_of(st.dtype);
    int64_t n = element_count(st.shape);
    tensor.data.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      tensor.data.push_back(leaf(logical_leaf_name(t, i), tensor.cls));
    values[t] = std::move(tensor);
  }
  const OpRegistry& registry = OpRegistry::instance();
  auto run_ops = [&](bool parallel) {
    for (const StageOp& op : stage.ops) {
      if (op.parallel != parallel) continue;
      OpCall call;
      call.op = op.op;
      call.attrs = op.attrs;
      call.group = op.group;
      std::vector<Tensor<V>> inputs;
      std::vector<Shape> full;
      for (int t : op.in) {
        inputs.push_back(*values[t]);
        full.push_back(stage.tensors[t].full_shape);
      }
      const OpDef* def = registry.find(op.op);
      // Only the full sizes the op declares: the proof key covers those.
      call.full_in_shapes = declared_full_shapes(op.op, op.attrs, std::move(full));
      for (int t : op.out) {
        call.out_shapes.push_back(stage.tensors[t].shape);
        call.out_dtypes.push_back(stage.tensors[t].dtype);
      }
      std::vector<Tensor<V>> outputs = def->eval(alg, call, inputs);
      for (size_t k = 0; k < op.out.size(); ++k) values[op.out[k]] = std::move(outputs[k]);
      if (after_op) after_op(op);
    }
  };
  // The logical side first: parallel claims may read computed logical tensors
  // (a replica claiming the stage's own target).
  run_ops(false);
  // Parallel free tensors: a plain claim is the logical slice itself; parts
  // 0..n-2 of one (tensor, slice, n) are free leaves and part n-1 is the
  // logical slice minus them, which parametrises every set of parts that
  // sums to the slice. Replicas of one part share its leaves. A scaled
  // claim (scale c != 0) is c times the slice; scaled parts add up to c
  // times it, so the same leaves parametrise them with c x slice in place
  // of the slice.
  using PartKey = std::tuple<int, SliceSpec, int64_t, int64_t, int64_t>;
  std::map<PartKey, std::map<int64_t, int>> part_owner;  // key -> k -> owning tensor
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (st.parallel && st.free && st.of && st.of->has_part) {
      auto& owners = part_owner[{st.logical_index, st.of->slice, st.of->part_n, st.of->scale_num,
                                 st.of->scale_den}];
      owners.emplace(st.of->part_k, static_cast<int>(t));
    }
  }
  auto part_leaves = [&](int owner, const Shape& shape, DClass cls) {
    Tensor<V> tensor;
    tensor.shape = shape;
    tensor.cls = cls;
    for (int64_t i = 0; i < element_count(shape); ++i)
      tensor.data.push_back(leaf(part_leaf_name(owner, i), cls));
    return tensor;
  };
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (!st.parallel || !st.free || !st.of) continue;
    Tensor<V> logical = scaled_by(alg, slice_of(*values[st.logical_index], st.of->slice),
                                  {st.of->scale_num, st.of->scale_den});
    DClass cls = dclass_of(st.dtype);
    if (!st.of->has_part) {
      values[t] = std::move(logical);
      continue;
    }
    auto& owners = part_owner[{st.logical_index, st.of->slice, st.of->part_n, st.of->scale_num,
                               st.of->scale_den}];
    if (st.of->part_k != st.of->part_n - 1) {
      values[t] = part_leaves(owners.at(st.of->part_k), st.shape, cls);
      continue;
    }
    Tensor<V> last = logical;
    for (int64_t k = 0; k + 1 < st.of->part_n; ++k) {
      // A part not present in the stage still takes its leaves: the same
      // name scheme keyed by this tensor keeps them distinct.
      int owner = owners.count(k) ? owners.at(k) : -static_cast<int>(t) - 1000 * (k + 1);
      Tensor<V> other = part_leaves(owner, st.shape, cls);
      for (int64_t i = 0; i < last.size(); ++i) last.data[i] = alg.sub(last.data[i], other.data[i]);
    }
    values[t] = std::move(last);
  }
  // Index validity is assumed for the logical graph's uses only.
  if constexpr (requires { alg.stop_trusting(); }) alg.stop_trusting();
  run_ops(true);
  return values;
}

}  // namespace shardproof
