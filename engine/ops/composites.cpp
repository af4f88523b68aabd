// Neural-network composites, each evaluated as exactly its contract
// expansion: softmax, log_softmax, rmsnorm, layernorm.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

template <class V>
using Tensors = std::vector<Tensor<V>>;

template <class Alg, class V = typename Alg::Value>
Tensor<V> max_keep(Alg& alg, const Tensor<V>& x, const std::vector<bool>& reduced) {
  return reduce_tensor(x, reduced, true, x.cls,
                       [&](const std::vector<V>& g) { return maximum_of(alg, g); });
}

template <class Alg, class V = typename Alg::Value>
Tensor<V> sum_keep(Alg& alg, const Tensor<V>& x, const std::vector<bool>& reduced) {
  return reduce_tensor(x, reduced, true, x.cls,
                       [&](const std::vector<V>& g) { return alg.sum(g); });
}

// mean over the last dim, dividing by the full-size count of that dim.
template <class Alg, class V = typename Alg::Value>
Tensor<V> mean_last(Alg& alg, const Tensor<V>& x, int64_t full_count) {
  std::vector<bool> reduced(x.shape.size(), false);
  reduced.back() = true;
  const V count = alg.constant(Rational(full_count), DClass::Real);
  return reduce_tensor(x, reduced, true, x.cls,
                       [&](const std::vector<V>& g) { return alg.div(alg.sum(g), count); });
}

template <class V, class F>
Tensor<V> zip(const std::vector<const Tensor<V>*>& ins, F&& f) {
  std::vector<Shape> shapes;
  for (auto* t : ins) shapes.push_back(t->shape);
  Shape out;
  broadcast_shapes("", shapes, out);
  return elementwise(ins, out, ins[0]->cls, std::forward<F>(f));
}

template <bool Log>
struct Softmax {
  static const char* op() { return Log ? "log_softmax" : "softmax"; }
  static std::string name() { return op(); }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs(op(), attrs, {{"dim", AttrType::Int, true}}); !e.empty()) return e;
    if (auto e = check_input_count(op(), in, 1); !e.empty()) return e;
    if (auto e = check_output_count(op(), n_out, 1); !e.empty()) return e;
    if (auto e = check_class(op(), in, 0, Allowed::Real); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim(op(), "dim", attrs.at("dim").as_int(), in[0].shape, dim); !e.empty())
      return e;
    if (in[0].shape[dim] == 0)
      return std::string(op()) + ": dim " + std::to_string(dim) + " of " +
             shape_to_string(in[0].shape) + " is empty";
    out = {in[0]};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const Tensor<V>& x = in[0];
    int dim = 0;
    normalize_dim(op(), "dim", call.attrs.at("dim").as_int(), x.shape, dim);
    std::vector<bool> reduced(x.shape.size(), false);
    reduced[dim] = true;
    Tensor<V> m = max_keep(alg, x, reduced);
    Tensor<V> d = zip<V>({&x, &m}, [&](const std::vector<V>& a) { return alg.sub(a[0], a[1]); });
    Tensor<V> e = map_tensor(d, x.cls, [&](const V& v) { return alg.call("exp", {v}); });
    Tensor<V> s = sum_keep(alg, e, reduced);
    if constexpr (Log) {
      return {zip<V>({&d, &s}, [&](const std::vector<V>& a) {
        return alg.sub(a[0], alg.call("log", {a[1]}));
      })};
    } else {
      return {zip<V>({&e, &s}, [&](const std::vector<V>& a) { return alg.div(a[0], a[1]); })};
    }
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    for (int d = 0; d < int(in[0].shape.size()); ++d) rel.same({0, d}, {1, d});
    int dim = 0;
    normalize_dim(op(), "dim", attrs.at("dim").as_int(), in[0].shape, dim);
    rel.combine({0, dim});  // max and sum along dim
  }
};

// rmsnorm (x, w) and layernorm (x, w, b) over the last dim.
template <bool Layer>
struct Norm {
  static const char* op() { return Layer ? "layernorm" : "rmsnorm"; }
  static std::string name() { return op(); }
  static constexpr size_t kInputs = Layer ? 3 : 2;
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs(op(), attrs, {{"eps", AttrType::Number, true}}); !e.empty()) return e;
    if (auto e = check_input_count(op(), in, kInputs); !e.empty()) return e;
    if (auto e = check_output_count(op(), n_out, 1); !e.empty()) return e;
    for (size_t i = 0; i < in.size(); ++i)
      if (auto e = check_class(op(), in, i, Allowed::Real); !e.empty()) return e;
    const Shape& x = in[0].shape;
    if (x.empty()) return std::string(op()) + ": x must have rank >= 1, found a scalar";
    if (x.back() == 0)
      return std::string(op()) + ": the last dim of x " + shape_to_string(x) + " is empty";
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].shape != Shape{x.back()})
        return std::string(op()) + ": input " + std::to_string(i) + " must have shape [" +
               std::to_string(x.back()) + "] (the last dim of x " + shape_to_string(x) +
               "), found " + shape_to_string(in[i].shape);
    out = {in[0]};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const Tensor<V>& x = in[0];
    std::vector<bool> last(x.shape.size(), false);
    last.back() = true;
    const int64_t count = full_count(call, 0, last);
    const V eps = alg.constant(call.attrs.at("eps").number, DClass::Real);
    auto mul = [&](const std::vector<V>& a) { return alg.mul(a[0], a[1]); };
    auto rsqrt_plus_eps = [&](const V& v) { return alg.call("rsqrt", {alg.add(v, eps)}); };
    Tensor<V> centred = x;
    if constexpr (Layer) {
      Tensor<V> mu = mean_last(alg, x, count);
      centred = zip<V>({&x, &mu}, [&](const std::vector<V>& a) { return alg.sub(a[0], a[1]); });
    }
    Tensor<V> sq = zip<V>({&centred, &centred}, mul);
    Tensor<V> r = map_tensor(mean_last(alg, sq, count), x.cls, rsqrt_plus_eps);
    Tensor<V> y = zip<V>({&centred, &r}, mul);
    y = zip<V>({&y, &in[1]}, mul);
    if constexpr (Layer)
      y = zip<V>({&y, &in[2]}, [&](const std::vector<V>& a) { return alg.add(a[0], a[1]); });
    return {y};
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    const int rank = int(in[0].shape.size());
    const int out = int(kInputs);
    for (int d = 0; d < rank; ++d) rel.same({0, d}, {out, d});
    for (int i = 1; i < out; ++i) rel.same({i, 0}, {out, rank - 1});
    // mean over the last dim (w and b repeat along every other dim: value
    // variation knows the norms).
    rel.combine({0, rank - 1});
  }
};

}  // namespace

void register_composite_ops(OpRegistry& r) {
  add_op<Softmax<false>>(r);
  add_op<Softmax<true>>(r);
  add_op<Norm<false>>(r);
  add_op<Norm<true>>(r);
}

}  // namespace shardproof::ops
