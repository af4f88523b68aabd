// Integer indexing: embedding and gather. Indices go through Alg::pick, so
// symbolically an input index is assumed valid and a computed one must be
// proven valid.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

template <class V>
using Tensors = std::vector<Tensor<V>>;

std::string check_index_class(const std::string& op, const std::vector<TensorInfo>& in, size_t i) {
  if (dclass_of(in[i].dtype) != DClass::Int)
    return op + ": input " + std::to_string(i) +
           " (the indices) must be an integer tensor, found " + describe(in[i]);
  return "";
}

// embedding(ids [...], table [V, d]) -> [..., d]
struct Embedding {
  static std::string name() { return "embedding"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("embedding", attrs, {}); !e.empty()) return e;
    if (auto e = check_input_count("embedding", in, 2); !e.empty()) return e;
    if (auto e = check_output_count("embedding", n_out, 1); !e.empty()) return e;
    if (auto e = check_index_class("embedding", in, 0); !e.empty()) return e;
    if (in[1].shape.size() != 2)
      return "embedding: the table (input 1) must have shape [V, d], found " + describe(in[1]);
    if (in[1].shape[0] == 0)
      return "embedding: the table (input 1) has no rows: " + describe(in[1]);
    Shape shape = in[0].shape;
    shape.push_back(in[1].shape[1]);
    out = {{shape, in[1].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall&,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const Tensor<V>&ids = in[0], &table = in[1];
    const int64_t rows = table.shape[0], d = table.shape[1];
    std::vector<V> data;
    for (const V& id : ids.data) {
      for (int64_t j = 0; j < d; ++j) {
        std::vector<V> column;
        for (int64_t v = 0; v < rows; ++v) column.push_back(table.data[v * d + j]);
        data.push_back(alg.pick(id, column));
      }
    }
    Shape shape = ids.shape;
    shape.push_back(d);
    return {make_tensor(shape, table.cls, std::move(data))};
  }
  // Rows are addressed by integer ids: the ids' values are positions on V.
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    rel.positions_on(0, {1, 0});
    const int r = int(in[0].shape.size());
    for (int d = 0; d < r; ++d) rel.same({0, d}, {2, d});
    rel.same({1, 1}, {2, r});
  }
};

// gather {dim}(x, index) -> index's shape; out[i] = x[i with dim := index[i]]
struct Gather {
  static std::string name() { return "gather"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("gather", attrs, {{"dim", AttrType::Int, true}}); !e.empty()) return e;
    if (auto e = check_input_count("gather", in, 2); !e.empty()) return e;
    if (auto e = check_output_count("gather", n_out, 1); !e.empty()) return e;
    if (auto e = check_index_class("gather", in, 1); !e.empty()) return e;
    const Shape &x = in[0].shape, &index = in[1].shape;
    if (x.size() != index.size())
      return "gather: index must have the rank of x, found x " + shape_to_string(x) +
             " and index " + shape_to_string(index);
    int dim = 0;
    if (auto e = normalize_dim("gather", "dim", attrs.at("dim").as_int(), x, dim); !e.empty())
      return e;
    if (x[dim] == 0)
      return "gather: dim " + std::to_string(dim) + " of x " + shape_to_string(x) + " is empty";
    for (size_t d = 0; d < x.size(); ++d)
      if (int(d) != dim && index[d] > x[d])
        return "gather: index " + shape_to_string(index) + " is larger than x " +
               shape_to_string(x) + " in dim " + std::to_string(d) + " (only dim " +
               std::to_string(dim) + " may differ freely)";
    out = {{index, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const Tensor<V>&x = in[0], &index = in[1];
    int dim = 0;
    normalize_dim("gather", "dim", call.attrs.at("dim").as_int(), x.shape, dim);
    std::vector<V> data;
    for (int64_t flat = 0; flat < index.size(); ++flat) {
      std::vector<int64_t> i = unflatten(index.shape, flat);
      std::vector<V> candidates;
      for (int64_t p = 0; p < x.shape[dim]; ++p) {
        i[dim] = p;
        candidates.push_back(x.at(i));
      }
      data.push_back(alg.pick(index.data[flat], candidates));
    }
    return {make_tensor(index.shape, x.cls, std::move(data))};
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    const Shape &x = in[0].shape, &index = in[1].shape;
    int dim = 0;
    normalize_dim("gather", "dim", attrs.at("dim").as_int(), x, dim);
    rel.positions_on(1, {0, dim});  // index values are positions along x's dim
    for (int d = 0; d < int(x.size()); ++d) {
      rel.same({1, d}, {2, d});
      if (d == dim) continue;
      if (x[d] == index[d])
        rel.same({0, d}, {2, d});
      else
        rel.sub_range({2, d}, {0, d}, 0);
    }
  }
};

}  // namespace

void register_indexing_ops(OpRegistry& r) {
  add_op<Embedding>(r);
  add_op<Gather>(r);
}

}  // namespace shardproof::ops
