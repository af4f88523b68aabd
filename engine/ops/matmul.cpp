// matmul {transpose_a, transpose_b}: [..., m, k] x [..., k, n], batch dims
// broadcast.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

struct Matmul {
  static std::string name() { return "matmul"; }

  // Positions (within a, b) of m, k and k, n after the transpose flags.
  static void positions(const AttrMap& attrs, size_t ra, size_t rb, int& am, int& ak, int& bk,
                        int& bn) {
    const bool ta = attr_bool(attrs, "transpose_a"), tb = attr_bool(attrs, "transpose_b");
    am = int(ra) - (ta ? 1 : 2);
    ak = int(ra) - (ta ? 2 : 1);
    bk = int(rb) - (tb ? 1 : 2);
    bn = int(rb) - (tb ? 2 : 1);
  }

  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs(
            "matmul", attrs,
            {{"transpose_a", AttrType::Bool, false}, {"transpose_b", AttrType::Bool, false}});
        !e.empty())
      return e;
    if (auto e = check_input_count("matmul", in, 2); !e.empty()) return e;
    if (auto e = check_output_count("matmul", n_out, 1); !e.empty()) return e;
    for (size_t i = 0; i < 2; ++i)
      if (auto e = check_class("matmul", in, i, Allowed::Numeric); !e.empty()) return e;
    if (auto e = check_same_class("matmul", in); !e.empty()) return e;
    const Shape &a = in[0].shape, &b = in[1].shape;
    if (a.size() < 2 || b.size() < 2)
      return "matmul: both inputs need rank >= 2, found a " + shape_to_string(a) + " and b " +
             shape_to_string(b);
    int am, ak, bk, bn;
    positions(attrs, a.size(), b.size(), am, ak, bk, bn);
    if (a[ak] != b[bk])
      return "matmul: contraction sizes differ: a is " + shape_to_string(a) +
             " (k=" + std::to_string(a[ak]) + "), b is " + shape_to_string(b) +
             " (k=" + std::to_string(b[bk]) + ")";
    Shape batch;
    if (auto e = broadcast_shapes(
            "matmul", {Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2)}, batch);
        !e.empty())
      return e + " (batch dims)";
    batch.push_back(a[am]);
    batch.push_back(b[bn]);
    out = {{batch, in[0].dtype}};
    return "";
  }

  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>& in) {
    using V = typename Alg::Value;
    const Tensor<V>&a = in[0], &b = in[1];
    const size_t ra = a.shape.size(), rb = b.shape.size();
    int am, ak, bk, bn;
    positions(call.attrs, ra, rb, am, ak, bk, bn);
    Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
    Shape out_shape;
    broadcast_shapes("matmul", {batch_a, batch_b}, out_shape);
    const size_t rbatch = out_shape.size();
    out_shape.push_back(a.shape[am]);
    out_shape.push_back(b.shape[bn]);
    const int64_t K = a.shape[ak];
    std::vector<V> data;
    std::vector<int64_t> ia(ra), ib(rb);
    for (int64_t flat = 0; flat < element_count(out_shape); ++flat) {
      std::vector<int64_t> o = unflatten(out_shape, flat);
      // Batch index of each operand, broadcast from the right.
      for (size_t d = 0; d + 2 < ra; ++d) ia[d] = batch_a[d] == 1 ? 0 : o[d + rbatch - (ra - 2)];
      for (size_t d = 0; d + 2 < rb; ++d) ib[d] = batch_b[d] == 1 ? 0 : o[d + rbatch - (rb - 2)];
      ia[am] = o[rbatch];
      ib[bn] = o[rbatch + 1];
      std::vector<V> terms;
      for (int64_t k = 0; k < K; ++k) {
        ia[ak] = k;
        ib[bk] = k;
        terms.push_back(alg.mul(a.at(ia), b.at(ib)));
      }
      data.push_back(terms.empty() ? alg.constant(0, a.cls) : alg.sum(terms));
    }
    return {make_tensor(out_shape, a.cls, std::move(data))};
  }

  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    const Shape &a = in[0].shape, &b = in[1].shape, &o = out[0].shape;
    int am, ak, bk, bn;
    positions(attrs, a.size(), b.size(), am, ak, bk, bn);
    const int ro = int(o.size());
    rel.same({0, am}, {2, ro - 2});
    rel.same({1, bn}, {2, ro - 1});
    rel.same({0, ak}, {1, bk});
    rel.combine({0, ak});
    relate_broadcast(rel, 0, Shape(a.begin(), a.end() - 2), 2, Shape(o.begin(), o.end() - 2));
    relate_broadcast(rel, 1, Shape(b.begin(), b.end() - 2), 2, Shape(o.begin(), o.end() - 2));
  }
};

}  // namespace

void register_matmul_ops(OpRegistry& r) {
  add_op<Matmul>(r);
}

}  // namespace shardproof::ops
