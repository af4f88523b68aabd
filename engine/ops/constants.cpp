// Operators without inputs: const and iota.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

std::string check_shape_attr(const std::string& op, const AttrMap& attrs, Shape& shape) {
  shape = attr_ints(attrs, "shape");
  for (int64_t s : shape)
    if (s < 0)
      return op + ": shape entries must be non-negative, found " + attrs.at("shape").describe();
  return "";
}

AttrMap with_shape(AttrMap attrs, const Shape& shape) {
  attrs["shape"] = Attr::of_int_list(shape);
  return attrs;
}

// "" when `value` fits the class of `dtype` (an integer for i32/i64, 0 or 1
// for bool, anything for a real dtype), else why not; `whose` names where
// the dtype came from.
std::string check_value_fits(const Rational& value, DType dtype, const std::string& whose) {
  if (dclass_of(dtype) == DClass::Int && value.get_den() != 1)
    return "const: value " + rational_to_string(value) + " is not an integer, but " + whose +
           " is " + dtype_name(dtype);
  if (dclass_of(dtype) == DClass::Bool && value != 0 && value != 1)
    return "const: a bool constant must have value 0 or 1, found " + rational_to_string(value) +
           " (" + whose + " is bool)";
  return "";
}

// const {value, shape, dtype?}. Without `dtype` (a project addition, see
// docs/plan-format.md) the constant takes the dtype of the tensor it
// defines (take_declared_dtypes); `infer` alone, without a declaration,
// gives i64 for an integral value and f32 otherwise. With `dtype`, the value
// must fit the dtype's class.
struct Const {
  static std::string name() { return "const"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("const", attrs,
                             {{"value", AttrType::Number, true},
                              {"shape", AttrType::IntList, true},
                              {"dtype", AttrType::String, false}});
        !e.empty())
      return e;
    if (auto e = check_input_count("const", in, 0); !e.empty()) return e;
    if (auto e = check_output_count("const", n_out, 1); !e.empty()) return e;
    TensorInfo t;
    if (auto e = check_shape_attr("const", attrs, t.shape); !e.empty()) return e;
    const Rational value = attrs.at("value").number;
    t.dtype = value.get_den() == 1 ? DType::I64 : DType::F32;
    if (attrs.count("dtype")) {
      auto dt = parse_dtype(attrs.at("dtype").text);
      if (!dt)
        return "const: dtype must be one of f32, f16, bf16, f64, i32, i64, bool, found " +
               attrs.at("dtype").describe();
      t.dtype = *dt;
      if (auto e = check_value_fits(value, t.dtype, "its dtype"); !e.empty()) return e;
    }
    out = {t};
    return "";
  }
  // Issue 20, family 6: `{value: 0}` or `{value: 1.0}` (the exact number 1)
  // defining an f32 tensor is a real constant, not an integer one refused.
  static std::string take_declared_dtypes(const AttrMap& attrs,
                                          const std::vector<TensorInfo>& declared,
                                          std::vector<TensorInfo>& out) {
    if (attrs.count("dtype") || declared.size() != 1 || out.size() != 1) return "";
    out[0].dtype = declared[0].dtype;
    return check_value_fits(attrs.at("value").number, out[0].dtype, "the tensor it defines");
  }
  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>&) {
    using V = typename Alg::Value;
    const DClass cls = dclass_of(dtype_of(call));
    const Shape& shape = out_shape_of(call);
    V v = alg.constant(call.attrs.at("value").number, cls);
    return {make_tensor(shape, cls, std::vector<V>(element_count(shape), v))};
  }
  static DType dtype_of(const OpCall& call) {
    if (!call.out_dtypes.empty()) return call.out_dtypes[0];
    std::vector<TensorInfo> out;
    infer(call.attrs, {}, 1, out);
    return out.empty() ? DType::F32 : out[0].dtype;
  }
  // One value repeated along every axis. An integer value is not used by
  // the const itself: its uses say whether it is a position (shape
  // reduction then rewrites it) or must keep its value.
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>&,
                          const std::vector<TensorInfo>&, AxisRelations& rel) {
    rel.same_positions(0, 0);
  }
  static AttrMap reduce_attrs(const AttrMap& attrs, const std::vector<Shape>&,
                              const std::vector<Shape>& reduced_out, const PositionMap&) {
    return with_shape(attrs, reduced_out.at(0));
  }
};

struct Iota {
  static std::string name() { return "iota"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("iota", attrs,
                             {{"shape", AttrType::IntList, true}, {"dim", AttrType::Int, true}});
        !e.empty())
      return e;
    if (auto e = check_input_count("iota", in, 0); !e.empty()) return e;
    if (auto e = check_output_count("iota", n_out, 1); !e.empty()) return e;
    TensorInfo t;
    t.dtype = DType::I64;
    if (auto e = check_shape_attr("iota", attrs, t.shape); !e.empty()) return e;
    int dim = 0;
    if (auto e = normalize_dim("iota", "dim", attrs.at("dim").as_int(), t.shape, dim); !e.empty())
      return e;
    out = {t};
    return "";
  }
  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>&) {
    using V = typename Alg::Value;
    const Shape& shape = out_shape_of(call);
    int dim = 0;
    normalize_dim("iota", "dim", call.attrs.at("dim").as_int(), shape, dim);
    std::vector<V> data;
    for (int64_t flat = 0; flat < element_count(shape); ++flat)
      data.push_back(alg.constant(Rational(unflatten(shape, flat)[dim]), DClass::Int));
    return {make_tensor(shape, DClass::Int, std::move(data))};
  }
  // The values are positions along `dim` (shape reduction maps them with
  // that axis's line). Along every other axis the same values repeat: a sum
  // along one counts the copies, exactly as for `const`.
  static void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>&,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    const Shape& shape = out.at(0).shape;
    int dim = 0;
    normalize_dim("iota", "dim", attrs.at("dim").as_int(), shape, dim);
    rel.positions_on(0, {0, dim});
  }
  static AttrMap reduce_attrs(const AttrMap& attrs, const std::vector<Shape>&,
                              const std::vector<Shape>& reduced_out, const PositionMap&) {
    return with_shape(attrs, reduced_out.at(0));
  }
};

}  // namespace

void register_constant_ops(OpRegistry& r) {
  add_op<Const>(r);
  add_op<Iota>(r);
}

}  // namespace shardproof::ops
