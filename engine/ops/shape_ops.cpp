// Data movement: reshape, transpose, slice, concat, split, expand.
#include <numeric>

#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

template <class V>
using Tensors = std::vector<Tensor<V>>;

int dim_of(const AttrMap& attrs, const std::string& key, const Shape& shape) {
  int d = 0;
  normalize_dim("", key, attrs.at(key).as_int(), shape, d);
  return d;
}

struct Reshape {
  static std::string name() { return "reshape"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("reshape", attrs, {{"shape", AttrType::IntList, true}}); !e.empty())
      return e;
    if (auto e = check_input_count("reshape", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("reshape", n_out, 1); !e.empty()) return e;
    Shape shape = attr_ints(attrs, "shape");
    for (int64_t s : shape)
      if (s < 0)
        return "reshape: shape entries must be non-negative, found " + attrs.at("shape").describe();
    if (element_count(shape) != element_count(in[0].shape))
      return "reshape: element counts differ: input " + shape_to_string(in[0].shape) + " has " +
             std::to_string(element_count(in[0].shape)) + " elements, shape " +
             shape_to_string(shape) + " has " + std::to_string(element_count(shape));
    out = {{shape, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    // Row-major: the flat data is unchanged.
    return {make_tensor(out_shape_of(call), in[0].cls, in[0].data)};
  }
  // Dims are matched in groups of equal product (size-1 dims carry no
  // positions). A group of one dim on each side is the same axis; one dim
  // split into several (or several merged into one) is a row-major product
  // of them; anything else (several to several) keeps its full size.
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_moved_positions(rel, 1, 1);
    const Shape& a = in[0].shape;
    const Shape& b = out[0].shape;
    auto freeze_all = [&] {
      for (size_t d = 0; d < a.size(); ++d) rel.freeze({0, int(d)});
      for (size_t d = 0; d < b.size(); ++d) rel.freeze({1, int(d)});
    };
    if (element_count(a) == 0) return freeze_all();
    size_t i = 0, j = 0;
    while (true) {
      while (i < a.size() && a[i] == 1) ++i;
      while (j < b.size() && b[j] == 1) ++j;
      if (i == a.size() || j == b.size()) return;
      std::vector<int> ga{int(i)}, gb{int(j)};
      int64_t pa = a[i++], pb = b[j++];
      while (pa != pb) {
        if (pa < pb && i < a.size()) {
          if (a[i] != 1) ga.push_back(int(i));
          pa *= a[i++];
        } else if (pb < pa && j < b.size()) {
          if (b[j] != 1) gb.push_back(int(j));
          pb *= b[j++];
        } else {
          return freeze_all();
        }
      }
      if (ga.size() == 1 && gb.size() == 1) {
        rel.same({0, ga[0]}, {1, gb[0]});
      } else if (ga.size() == 1) {
        std::vector<AxisRef> factors;
        for (int d : gb) factors.push_back({1, d});
        rel.product({0, ga[0]}, factors);
      } else if (gb.size() == 1) {
        std::vector<AxisRef> factors;
        for (int d : ga) factors.push_back({0, d});
        rel.product({1, gb[0]}, factors);
      } else {
        for (int d : ga) rel.freeze({0, d});
        for (int d : gb) rel.freeze({1, d});
      }
    }
  }
  static AttrMap reduce_attrs(AttrMap attrs, const std::vector<Shape>&,
                              const std::vector<Shape>& reduced_out, const PositionMap&) {
    attrs["shape"] = Attr::of_int_list(reduced_out.at(0));
    return attrs;
  }
};

struct Transpose {
  static std::string name() { return "transpose"; }
  static std::string perm_of(const AttrMap& attrs, const Shape& shape, std::vector<int>& perm) {
    std::vector<int64_t> raw = attr_ints(attrs, "perm");
    if (raw.size() != shape.size())
      return "transpose: perm " + attrs.at("perm").describe() + " has " +
             std::to_string(raw.size()) + " entries, the input " + shape_to_string(shape) +
             " has rank " + std::to_string(shape.size());
    perm.assign(raw.size(), 0);
    std::vector<bool> seen(raw.size(), false);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (auto e = normalize_dim("transpose", "perm entry", raw[i], shape, perm[i]); !e.empty())
        return e;
      if (seen[perm[i]])
        return "transpose: perm " + attrs.at("perm").describe() + " is not a permutation (dim " +
               std::to_string(perm[i]) + " appears twice)";
      seen[perm[i]] = true;
    }
    return "";
  }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("transpose", attrs, {{"perm", AttrType::IntList, true}}); !e.empty())
      return e;
    if (auto e = check_input_count("transpose", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("transpose", n_out, 1); !e.empty()) return e;
    std::vector<int> perm;
    if (auto e = perm_of(attrs, in[0].shape, perm); !e.empty()) return e;
    Shape shape;
    for (int p : perm) shape.push_back(in[0].shape[p]);
    out = {{shape, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    std::vector<int> perm;
    perm_of(call.attrs, in[0].shape, perm);
    Shape shape;
    for (int p : perm) shape.push_back(in[0].shape[p]);
    std::vector<V> data;
    std::vector<int64_t> src(shape.size());
    for (int64_t flat = 0; flat < element_count(shape); ++flat) {
      std::vector<int64_t> index = unflatten(shape, flat);
      for (size_t i = 0; i < perm.size(); ++i) src[perm[i]] = index[i];
      data.push_back(in[0].at(src));
    }
    return {make_tensor(shape, in[0].cls, std::move(data))};
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    relate_moved_positions(rel, 1, 1);
    std::vector<int> perm;
    perm_of(attrs, in[0].shape, perm);
    for (size_t i = 0; i < perm.size(); ++i) rel.same({0, perm[i]}, {1, int(i)});
  }
};

struct Slice {
  static std::string name() { return "slice"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("slice", attrs,
                             {{"dim", AttrType::Int, true},
                              {"start", AttrType::Int, true},
                              {"end", AttrType::Int, true}});
        !e.empty())
      return e;
    if (auto e = check_input_count("slice", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("slice", n_out, 1); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim("slice", "dim", attrs.at("dim").as_int(), in[0].shape, dim);
        !e.empty())
      return e;
    const int64_t start = attrs.at("start").as_int(), end = attrs.at("end").as_int();
    const int64_t size = in[0].shape[dim];
    if (start < 0 || start > end || end > size)
      return "slice: expected 0 <= start <= end <= " + std::to_string(size) + " (dim " +
             std::to_string(dim) + " of " + shape_to_string(in[0].shape) + "), found start " +
             std::to_string(start) + ", end " + std::to_string(end);
    Shape shape = in[0].shape;
    shape[dim] = end - start;
    out = {{shape, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    const int dim = dim_of(call.attrs, "dim", in[0].shape);
    const int64_t start = call.attrs.at("start").as_int(), end = call.attrs.at("end").as_int();
    return {slice_tensor(in[0], dim, start, end)};
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    relate_moved_positions(rel, 1, 1);
    const int dim = dim_of(attrs, "dim", in[0].shape);
    for (int d = 0; d < int(in[0].shape.size()); ++d) {
      if (d == dim)
        rel.sub_range({1, d}, {0, d}, attrs.at("start").as_int());
      else
        rel.same({0, d}, {1, d});
    }
  }
  static AttrMap reduce_attrs(AttrMap attrs, const std::vector<Shape>& reduced_in,
                              const std::vector<Shape>& reduced_out, const PositionMap& position) {
    const int dim = dim_of(attrs, "dim", reduced_in.at(0));
    const int64_t start = position(AxisRef{0, dim}, attrs.at("start").as_int());
    attrs["start"] = Attr::of_int(start);
    attrs["end"] = Attr::of_int(start + reduced_out.at(0)[dim]);
    return attrs;
  }
};

struct Concat {
  static std::string name() { return "concat"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("concat", attrs, {{"dim", AttrType::Int, true}}); !e.empty()) return e;
    if (in.empty()) return "concat: expected at least 1 input, found 0";
    if (auto e = check_output_count("concat", n_out, 1); !e.empty()) return e;
    if (auto e = check_same_class("concat", in); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim("concat", "dim", attrs.at("dim").as_int(), in[0].shape, dim);
        !e.empty())
      return e;
    Shape shape = in[0].shape;
    for (size_t i = 1; i < in.size(); ++i) {
      Shape a = in[0].shape, b = in[i].shape;
      if (a.size() == b.size()) a[dim] = b[dim] = 0;
      if (a != b)
        return "concat: input " + std::to_string(i) + " is " + shape_to_string(in[i].shape) +
               ", input 0 is " + shape_to_string(in[0].shape) +
               " (they must agree in every dim but dim " + std::to_string(dim) + ")";
      shape[dim] += in[i].shape[dim];
    }
    out = {{shape, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    return {concat_tensors(pointers(in), dim_of(call.attrs, "dim", in[0].shape))};
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    relate_moved_positions(rel, in.size(), 1);
    const int dim = dim_of(attrs, "dim", in[0].shape);
    const int n = int(in.size());
    int64_t offset = 0;
    for (int k = 0; k < n; ++k) {
      for (int d = 0; d < int(in[k].shape.size()); ++d) {
        if (d == dim)
          rel.sub_range({k, d}, {n, d}, offset);
        else
          rel.same({k, d}, {n, d});
      }
      offset += in[k].shape[dim];
    }
  }
};

struct Split {
  static std::string name() { return "split"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("split", attrs,
                             {{"dim", AttrType::Int, true}, {"sizes", AttrType::IntList, true}});
        !e.empty())
      return e;
    if (auto e = check_input_count("split", in, 1); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim("split", "dim", attrs.at("dim").as_int(), in[0].shape, dim);
        !e.empty())
      return e;
    std::vector<int64_t> sizes = attr_ints(attrs, "sizes");
    if (sizes.empty()) return "split: sizes must not be empty";
    if (auto e = check_output_count("split", n_out, sizes.size()); !e.empty())
      return e + " (one per entry of sizes " + attrs.at("sizes").describe() + ")";
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) return "split: sizes must be non-negative, found " + attrs.at("sizes").describe();
      total += s;
    }
    if (total != in[0].shape[dim])
      return "split: sizes " + attrs.at("sizes").describe() + " add up to " +
             std::to_string(total) + ", but dim " + std::to_string(dim) + " of " +
             shape_to_string(in[0].shape) + " has size " + std::to_string(in[0].shape[dim]);
    out.clear();
    for (int64_t s : sizes) {
      Shape shape = in[0].shape;
      shape[dim] = s;
      out.push_back({shape, in[0].dtype});
    }
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    const int dim = dim_of(call.attrs, "dim", in[0].shape);
    Tensors<typename Alg::Value> out;
    int64_t offset = 0;
    for (int64_t s : attr_ints(call.attrs, "sizes")) {
      out.push_back(slice_tensor(in[0], dim, offset, offset + s));
      offset += s;
    }
    return out;
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_moved_positions(rel, 1, out.size());
    const int dim = dim_of(attrs, "dim", in[0].shape);
    int64_t offset = 0;
    for (int k = 0; k < int(out.size()); ++k) {
      for (int d = 0; d < int(in[0].shape.size()); ++d) {
        if (d == dim)
          rel.sub_range({1 + k, d}, {0, d}, offset);
        else
          rel.same({0, d}, {1 + k, d});
      }
      offset += out[k].shape[dim];
    }
  }
  static AttrMap reduce_attrs(AttrMap attrs, const std::vector<Shape>& reduced_in,
                              const std::vector<Shape>& reduced_out, const PositionMap&) {
    const int dim = dim_of(attrs, "dim", reduced_in.at(0));
    std::vector<int64_t> sizes;
    for (const Shape& s : reduced_out) sizes.push_back(s[dim]);
    attrs["sizes"] = Attr::of_int_list(sizes);
    return attrs;
  }
};

struct Expand {
  static std::string name() { return "expand"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("expand", attrs, {{"shape", AttrType::IntList, true}}); !e.empty())
      return e;
    if (auto e = check_input_count("expand", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("expand", n_out, 1); !e.empty()) return e;
    Shape target = attr_ints(attrs, "shape");
    for (int64_t s : target)
      if (s < 0)
        return "expand: shape entries must be non-negative, found " + attrs.at("shape").describe();
    const Shape& s = in[0].shape;
    bool ok = target.size() >= s.size();
    for (size_t k = 0; ok && k < s.size(); ++k) {
      int64_t from = s[s.size() - 1 - k], to = target[target.size() - 1 - k];
      ok = from == to || from == 1;
    }
    if (!ok)
      return "expand: input " + shape_to_string(s) + " does not broadcast to shape " +
             shape_to_string(target);
    out = {{target, in[0].dtype}};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    return {elementwise(pointers(in), out_shape_of(call), in[0].cls,
                        [](const std::vector<V>& a) { return a[0]; })};
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_all_broadcast(rel, in, out);
    relate_moved_positions(rel, 1, 1);
  }
  static AttrMap reduce_attrs(AttrMap attrs, const std::vector<Shape>&,
                              const std::vector<Shape>& reduced_out, const PositionMap&) {
    attrs["shape"] = Attr::of_int_list(reduced_out.at(0));
    return attrs;
  }
};

}  // namespace

void register_shape_ops(OpRegistry& r) {
  add_op<Reshape>(r);
  add_op<Transpose>(r);
  add_op<Slice>(r);
  add_op<Concat>(r);
  add_op<Split>(r);
  add_op<Expand>(r);
}

}  // namespace shardproof::ops
