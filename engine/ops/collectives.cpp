// Collectives (parallel graph only). Input i and output i belong to group
// member i; infer() sees one input per member.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

template <class V>
using Tensors = std::vector<Tensor<V>>;

// Common checks: attributes, one input and one output per member, one
// shape and dtype class for all inputs.
std::string check_collective(const std::string& op, const AttrMap& attrs,
                             const std::vector<AttrRule>& rules, const std::vector<TensorInfo>& in,
                             size_t n_out) {
  if (auto e = check_attrs(op, attrs, rules); !e.empty()) return e;
  if (in.empty()) return op + ": expected at least 1 input (one per group member), found 0";
  if (n_out != in.size())
    return op + ": expected one output per group member (" + std::to_string(in.size()) +
           "), found " + std::to_string(n_out);
  if (auto e = check_same_class(op, in); !e.empty()) return e;
  return check_same_shape(op, in);
}

std::string check_reduce(const std::string& op, const AttrMap& attrs,
                         const std::vector<TensorInfo>& in) {
  const std::string r = attr_string(attrs, "reduce", "sum");
  if (r != "sum" && r != "max" && r != "mean")
    return op + ": reduce must be \"sum\", \"max\" or \"mean\", found " +
           attrs.at("reduce").describe();
  return check_class(op, in, 0, r == "mean" ? Allowed::Real : Allowed::Numeric);
}

// Elementwise reduction of all inputs, in group order.
template <class Alg, class V = typename Alg::Value>
Tensor<V> reduce_all(Alg& alg, const std::string& how, const Tensors<V>& in) {
  const int64_t n = static_cast<int64_t>(in.size());
  return elementwise(pointers(in), in[0].shape, in[0].cls, [&](const std::vector<V>& a) {
    if (how == "max") return maximum_of(alg, a);
    V s = alg.sum(a);
    // mean divides by the group size (not a tensor size: unaffected by reduction).
    return how == "mean" ? alg.div(s, alg.constant(Rational(n), DClass::Real)) : s;
  });
}

void relate_same_all(const std::vector<TensorInfo>& in, const std::vector<TensorInfo>& out,
                     AxisRelations& rel) {
  const int n = int(in.size());
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < int(out.size()); ++o)
      for (int d = 0; d < int(in[i].shape.size()); ++d) rel.same({i, d}, {n + o, d});
}

int dim_attr(const AttrMap& attrs, const std::string& key, const Shape& shape) {
  int d = 0;
  normalize_dim("", key, attrs.at(key).as_int(), shape, d);
  return d;
}

std::string check_divisible(const std::string& op, const std::string& what, const Shape& shape,
                            int dim, size_t n) {
  if (shape[dim] % static_cast<int64_t>(n) != 0)
    return op + ": " + what + " " + std::to_string(dim) + " of " + shape_to_string(shape) +
           " (size " + std::to_string(shape[dim]) + ") does not divide into " + std::to_string(n) +
           " equal pieces";
  return "";
}

struct AllReduce {
  static constexpr bool kCollective = true;
  static std::string name() { return "all_reduce"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e =
            check_collective("all_reduce", attrs, {{"reduce", AttrType::String, false}}, in, n_out);
        !e.empty())
      return e;
    if (auto e = check_reduce("all_reduce", attrs, in); !e.empty()) return e;
    out.assign(n_out, in[0]);
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    auto r = reduce_all(alg, attr_string(call.attrs, "reduce", "sum"), in);
    return Tensors<typename Alg::Value>(in.size(), r);
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_same_all(in, out, rel);
  }
};

struct AllGather {
  static constexpr bool kCollective = true;
  static std::string name() { return "all_gather"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_collective("all_gather", attrs, {{"dim", AttrType::Int, true}}, in, n_out);
        !e.empty())
      return e;
    int dim = 0;
    if (auto e = normalize_dim("all_gather", "dim", attrs.at("dim").as_int(), in[0].shape, dim);
        !e.empty())
      return e;
    TensorInfo t = in[0];
    t.shape[dim] *= static_cast<int64_t>(in.size());
    out.assign(n_out, t);
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    auto r = concat_tensors(pointers(in), dim_attr(call.attrs, "dim", in[0].shape));
    return Tensors<typename Alg::Value>(in.size(), r);
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_moved_positions(rel, in.size(), out.size());
    const int n = int(in.size());
    const int dim = dim_attr(attrs, "dim", in[0].shape);
    const int64_t len = in[0].shape[dim];
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < int(out.size()); ++o)
        for (int d = 0; d < int(in[i].shape.size()); ++d) {
          if (d == dim)
            rel.sub_range({i, d}, {n + o, d}, i * len);
          else
            rel.same({i, d}, {n + o, d});
        }
  }
};

struct ReduceScatter {
  static constexpr bool kCollective = true;
  static std::string name() { return "reduce_scatter"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_collective(
            "reduce_scatter", attrs,
            {{"dim", AttrType::Int, true}, {"reduce", AttrType::String, false}}, in, n_out);
        !e.empty())
      return e;
    if (auto e = check_reduce("reduce_scatter", attrs, in); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim("reduce_scatter", "dim", attrs.at("dim").as_int(), in[0].shape, dim);
        !e.empty())
      return e;
    if (auto e = check_divisible("reduce_scatter", "dim", in[0].shape, dim, in.size()); !e.empty())
      return e;
    TensorInfo t = in[0];
    t.shape[dim] /= static_cast<int64_t>(in.size());
    out.assign(n_out, t);
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    auto r = reduce_all(alg, attr_string(call.attrs, "reduce", "sum"), in);
    const int dim = dim_attr(call.attrs, "dim", in[0].shape);
    const int64_t len = in[0].shape[dim] / static_cast<int64_t>(in.size());
    Tensors<typename Alg::Value> out;
    for (size_t i = 0; i < in.size(); ++i)
      out.push_back(slice_tensor(r, dim, i * len, (i + 1) * len));
    return out;
  }
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    const int n = int(in.size());
    const int dim = dim_attr(attrs, "dim", in[0].shape);
    const int64_t len = out[0].shape[dim];
    for (int k = 0; k < n; ++k)
      for (int o = 0; o < int(out.size()); ++o)
        for (int d = 0; d < int(in[k].shape.size()); ++d) {
          if (d == dim)
            rel.sub_range({n + o, d}, {k, d}, o * len);
          else
            rel.same({k, d}, {n + o, d});
        }
  }
};

struct AllToAll {
  static constexpr bool kCollective = true;
  static std::string name() { return "all_to_all"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_collective(
            "all_to_all", attrs,
            {{"split_dim", AttrType::Int, true}, {"concat_dim", AttrType::Int, true}}, in, n_out);
        !e.empty())
      return e;
    int sd = 0, cd = 0;
    if (auto e = normalize_dim("all_to_all", "split_dim", attrs.at("split_dim").as_int(),
                               in[0].shape, sd);
        !e.empty())
      return e;
    if (auto e = normalize_dim("all_to_all", "concat_dim", attrs.at("concat_dim").as_int(),
                               in[0].shape, cd);
        !e.empty())
      return e;
    if (auto e = check_divisible("all_to_all", "split_dim", in[0].shape, sd, in.size()); !e.empty())
      return e;
    TensorInfo t = in[0];
    t.shape[sd] /= static_cast<int64_t>(in.size());
    t.shape[cd] *= static_cast<int64_t>(in.size());
    out.assign(n_out, t);
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const int sd = dim_attr(call.attrs, "split_dim", in[0].shape);
    const int cd = dim_attr(call.attrs, "concat_dim", in[0].shape);
    const size_t n = in.size();
    const int64_t len = in[0].shape[sd] / static_cast<int64_t>(n);
    Tensors<V> out;
    for (size_t j = 0; j < n; ++j) {
      Tensors<V> pieces;
      for (size_t i = 0; i < n; ++i)
        pieces.push_back(slice_tensor(in[i], sd, j * len, (j + 1) * len));
      out.push_back(concat_tensors(pointers(pieces), cd));
    }
    return out;
  }
  // Pieces move between the split and concat axes: keep both at full size.
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_moved_positions(rel, in.size(), out.size());
    const int n = int(in.size());
    const int sd = dim_attr(attrs, "split_dim", in[0].shape);
    const int cd = dim_attr(attrs, "concat_dim", in[0].shape);
    for (int s = 0; s < n + int(out.size()); ++s) {
      rel.freeze({s, sd});
      rel.freeze({s, cd});
    }
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < int(out.size()); ++o)
        for (int d = 0; d < int(in[i].shape.size()); ++d)
          if (d != sd && d != cd) rel.same({i, d}, {n + o, d});
  }
};

struct Broadcast {
  static constexpr bool kCollective = true;
  static std::string name() { return "broadcast"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_collective("broadcast", attrs, {{"root", AttrType::Int, true}}, in, n_out);
        !e.empty())
      return e;
    const int64_t root = attrs.at("root").as_int();
    if (root < 0 || root >= static_cast<int64_t>(in.size()))
      return "broadcast: root must index the group (0.." + std::to_string(in.size() - 1) +
             "), found " + std::to_string(root);
    out.assign(n_out, in[0]);
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    return Tensors<typename Alg::Value>(in.size(), in[call.attrs.at("root").as_int()]);
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_same_all(in, out, rel);
    relate_moved_positions(rel, in.size(), out.size());
  }
};

struct Send {
  static constexpr bool kCollective = true;
  static std::string name() { return "send"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("send", attrs, {}); !e.empty()) return e;
    if (auto e = check_input_count("send", in, 1); !e.empty()) return e;
    if (auto e = check_output_count("send", n_out, 1); !e.empty()) return e;
    out = {in[0]};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg&, const OpCall&,
                                           const Tensors<typename Alg::Value>& in) {
    return {in[0]};
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_same_all(in, out, rel);
    relate_moved_positions(rel, in.size(), out.size());
  }
};

}  // namespace

void register_collective_ops(OpRegistry& r) {
  add_op<AllReduce>(r);
  add_op<AllGather>(r);
  add_op<ReduceScatter>(r);
  add_op<AllToAll>(r);
  add_op<Broadcast>(r);
  add_op<Send>(r);
}

}  // namespace shardproof::ops
