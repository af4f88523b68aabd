// sum, mean, max over `dims` (default: all), with `keepdim`.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

enum class Kind { Sum, Mean, Max };

template <Kind K>
struct Reduction {
  static const char* op() { return K == Kind::Sum ? "sum" : K == Kind::Mean ? "mean" : "max"; }
  static std::string name() { return op(); }

  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs(
            op(), attrs, {{"dims", AttrType::IntList, false}, {"keepdim", AttrType::Bool, false}});
        !e.empty())
      return e;
    if (auto e = check_input_count(op(), in, 1); !e.empty()) return e;
    if (auto e = check_output_count(op(), n_out, 1); !e.empty()) return e;
    // mean divides: like div, it is invalid on integers.
    if (auto e = check_class(op(), in, 0, K == Kind::Mean ? Allowed::Real : Allowed::Numeric);
        !e.empty())
      return e;
    std::vector<bool> reduced;
    if (auto e = reduced_dims(op(), attrs, in[0].shape, reduced); !e.empty()) return e;
    if (K != Kind::Sum)
      for (size_t d = 0; d < reduced.size(); ++d)
        if (reduced[d] && in[0].shape[d] == 0)
          return std::string(op()) + ": cannot reduce dim " + std::to_string(d) + " of size 0 in " +
                 shape_to_string(in[0].shape);
    out = {{reduce_shape(in[0].shape, reduced, attr_bool(attrs, "keepdim")), in[0].dtype}};
    return "";
  }

  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>& in) {
    using V = typename Alg::Value;
    std::vector<bool> reduced;
    reduced_dims(op(), call.attrs, in[0].shape, reduced);
    const bool keepdim = attr_bool(call.attrs, "keepdim");
    const DClass cls = in[0].cls;
    if constexpr (K == Kind::Sum) {
      return {reduce_tensor(in[0], reduced, keepdim, cls,
                            [&](const std::vector<V>& g) { return sum_of(alg, g, cls); })};
    } else if constexpr (K == Kind::Max) {
      return {reduce_tensor(in[0], reduced, keepdim, cls,
                            [&](const std::vector<V>& g) { return maximum_of(alg, g); })};
    } else {
      // The count comes from the full shapes: soundness under shape reduction.
      const V count = alg.constant(Rational(full_count(call, 0, reduced)), DClass::Real);
      return {reduce_tensor(in[0], reduced, keepdim, cls,
                            [&](const std::vector<V>& g) { return alg.div(alg.sum(g), count); })};
    }
  }

  template <class Alg, class V>
  static V sum_of(Alg& alg, const std::vector<V>& g, DClass cls) {
    return g.empty() ? alg.constant(0, cls) : alg.sum(g);
  }

  // Kept dims are the output's dims; reduced dims need no relation.
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    std::vector<bool> reduced;
    reduced_dims(op(), attrs, in[0].shape, reduced);
    const bool keepdim = attr_bool(attrs, "keepdim");
    int o = 0;
    for (int d = 0; d < int(reduced.size()); ++d) {
      if (!reduced[d]) {
        rel.same({0, d}, {1, o++});
        continue;
      }
      rel.combine({0, d});
      if (keepdim) ++o;
    }
  }
};

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  add_op<Reduction<Kind::Sum>>(r);
  add_op<Reduction<Kind::Mean>>(r);
  add_op<Reduction<Kind::Max>>(r);
}

}  // namespace shardproof::ops
