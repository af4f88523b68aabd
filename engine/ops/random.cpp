// random {shape, full?, offset?}: draws from a generator state, as dropout
// does. Element i of the output is R(state, position of i), R one
// uninterpreted function ("random") of the state and the element's
// row-major position in a `full`-shaped tensor, the output sitting at
// `offset` in it (default: full = shape, offset 0). A shard of a logical
// draw writes the logical tensor's shape as `full` and its slice's start as
// `offset`; it then holds exactly the logical values at those positions.
//
// Because R is arbitrary, a proof holds for every generator: two draws are
// equal only when state and position are, so ranks that must share a mask
// (a replicated activation) must draw with one state at the same positions,
// and ranks that hold different pieces of a sharded activation draw
// different values because their positions differ (docs/soundness.md,
// "Random draws").
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

struct Random {
  static std::string name() { return "random"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("random", attrs,
                             {{"shape", AttrType::IntList, true},
                              {"full", AttrType::IntList, false},
                              {"offset", AttrType::IntList, false}});
        !e.empty())
      return e;
    if (auto e = check_input_count("random", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("random", n_out, 1); !e.empty()) return e;
    if (auto e = check_class("random", in, 0, Allowed::Real); !e.empty()) return e;
    if (!in[0].shape.empty())
      return "random: the generator state (input 0) must be a scalar, found " + describe(in[0]);
    TensorInfo t;
    t.dtype = DType::F32;
    t.shape = attr_ints(attrs, "shape");
    const Shape full = attrs.count("full") ? attr_ints(attrs, "full") : t.shape;
    const Shape offset = attrs.count("offset") ? attr_ints(attrs, "offset") : Shape(t.shape.size());
    if (full.size() != t.shape.size() || offset.size() != t.shape.size())
      return "random: shape, full and offset must have one entry per dimension, found " +
             attrs.at("shape").describe() +
             (attrs.count("full") ? ", " + attrs.at("full").describe() : "") +
             (attrs.count("offset") ? ", " + attrs.at("offset").describe() : "");
    for (size_t d = 0; d < full.size(); ++d)
      if (t.shape[d] < 0 || offset[d] < 0 || offset[d] + t.shape[d] > full[d])
        return "random: dimension " + std::to_string(d) +
               " needs 0 <= offset and offset + shape <= full, found shape " +
               std::to_string(t.shape[d]) + ", offset " + std::to_string(offset[d]) + ", full " +
               std::to_string(full[d]);
    out = {t};
    return "";
  }
  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>& in) {
    using V = typename Alg::Value;
    const Shape shape = attr_ints(call.attrs, "shape");
    const Shape full = call.attrs.count("full") ? attr_ints(call.attrs, "full") : shape;
    const Shape offset =
        call.attrs.count("offset") ? attr_ints(call.attrs, "offset") : Shape(shape.size());
    std::vector<V> data;
    for (int64_t flat = 0; flat < element_count(shape); ++flat) {
      const std::vector<int64_t> index = unflatten(shape, flat);
      int64_t position = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        position = position * full[d] + offset[d] + index[d];
      data.push_back(
          alg.call("random", {in[0].data[0], alg.constant(Rational(position), DClass::Real)}));
    }
    return {make_tensor(shape, DClass::Real, std::move(data))};
  }
  // Positions are absolute: every output axis keeps its full size (the
  // default freezes every axis; written out so the rule is visible here).
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>&,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    for (int d = 0; d < static_cast<int>(out.at(0).shape.size()); ++d) rel.freeze({1, d});
  }
};

}  // namespace

void register_random_ops(OpRegistry& r) {
  add_op<Random>(r);
}

}  // namespace shardproof::ops
