// Elementwise operators with NumPy broadcasting: arithmetic, the
// uninterpreted functions, map, comparisons, where, cast, scale, pow.
#include <optional>

#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

// Defaults every kernel may shadow.
struct KernelBase {
  static constexpr int kArity = 1;  // -1: one or more (map)
  static constexpr Allowed kAllowed = Allowed::Numeric;
  static constexpr size_t kFirstValue = 0;  // where: operand 0 is the condition
  static std::vector<AttrRule> rules() { return {}; }
  static std::string check(const AttrMap&, const std::vector<TensorInfo>&) { return ""; }
  static std::optional<DType> out_dtype(const AttrMap&, const std::vector<TensorInfo>&) {
    return std::nullopt;  // the first value operand's dtype
  }
  // What the kernel does to integer positions (op_def.h, "Integer
  // positions"); integer operands left unmentioned are opaque uses.
  static void relate_positions(const std::vector<TensorInfo>&, const std::vector<TensorInfo>&,
                               AxisRelations&) {}
};

bool all_integer(const std::vector<TensorInfo>& in) {
  for (const TensorInfo& t : in)
    if (dclass_of(t.dtype) != DClass::Int) return false;
  return true;
}

// One elementwise operator from a kernel K:
//   template <class Alg> static V apply(Alg&, const AttrMap&, const std::vector<V>& args,
//                                      const std::vector<DClass>& classes, DClass out);
template <class K>
struct Elementwise {
  static std::string name() { return K::kName; }

  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    const std::string op = K::kName;
    if (auto e = check_attrs(op, attrs, K::rules()); !e.empty()) return e;
    if (K::kArity >= 0) {
      if (auto e = check_input_count(op, in, K::kArity); !e.empty()) return e;
    } else if (in.empty()) {
      return op + ": expected at least 1 input, found 0";
    }
    if (auto e = check_output_count(op, n_out, 1); !e.empty()) return e;
    for (size_t i = K::kFirstValue; i < in.size(); ++i)
      if (auto e = check_class(op, in, i, K::kAllowed); !e.empty()) return e;
    if (auto e = check_same_class(op, in, K::kFirstValue); !e.empty()) return e;
    if (auto e = K::check(attrs, in); !e.empty()) return e;
    std::vector<Shape> shapes;
    for (const TensorInfo& t : in) shapes.push_back(t.shape);
    TensorInfo result;
    if (auto e = broadcast_shapes(op, shapes, result.shape); !e.empty()) return e;
    result.dtype = K::out_dtype(attrs, in).value_or(in[K::kFirstValue].dtype);
    out = {result};
    return "";
  }

  template <class Alg>
  static std::vector<Tensor<typename Alg::Value>> eval(
      Alg& alg, const OpCall& call, const std::vector<Tensor<typename Alg::Value>>& in) {
    using V = typename Alg::Value;
    std::vector<DClass> classes;
    for (const auto& t : in) classes.push_back(t.cls);
    const DClass out_cls = out_class(call, classes);
    std::vector<Shape> shapes;
    for (const auto& t : in) shapes.push_back(t.shape);
    Shape out_shape;
    broadcast_shapes(K::kName, shapes, out_shape);
    return {elementwise(pointers(in), out_shape, out_cls, [&](const std::vector<V>& args) {
      return K::apply(alg, call.attrs, args, classes, out_cls);
    })};
  }

  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_all_broadcast(rel, in, out);
    K::relate_positions(in, out, rel);
  }

  // The declared output class, or (when the caller gave no dtypes) the one
  // infer() would give.
  static DClass out_class(const OpCall& call, const std::vector<DClass>& classes) {
    if (!call.out_dtypes.empty()) return dclass_of(call.out_dtypes[0]);
    std::vector<TensorInfo> info;
    for (DClass c : classes)
      info.push_back({{},
                      c == DClass::Real  ? DType::F32
                      : c == DClass::Int ? DType::I64
                                         : DType::Bool});
    std::optional<DType> dt = K::out_dtype(call.attrs, info);
    return dt ? dclass_of(*dt) : classes.at(K::kFirstValue);
  }
};

// SHIFT: +1 / -1 for add / sub (an integer position shifted by a constant),
// 0 for kernels whose integer results are not positions.
#define BINARY(NAME, ALLOWED, EXPR, SHIFT)                                                        \
  struct K_##NAME : KernelBase {                                                                  \
    static constexpr const char* kName = #NAME;                                                   \
    static constexpr int kArity = 2;                                                              \
    static constexpr Allowed kAllowed = ALLOWED;                                                  \
    static void relate_positions(const std::vector<TensorInfo>& in,                               \
                                 const std::vector<TensorInfo>&, AxisRelations& rel) {            \
      if (SHIFT != 0 && all_integer(in)) rel.shifted_positions(2, 0, 1, SHIFT);                   \
    }                                                                                             \
    template <class Alg, class V>                                                                 \
    static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&, \
                   DClass) {                                                                      \
      return EXPR;                                                                                \
    }                                                                                             \
  };

BINARY(add, Allowed::Numeric, alg.add(a[0], a[1]), +1)
BINARY(sub, Allowed::Numeric, alg.sub(a[0], a[1]), -1)
BINARY(mul, Allowed::Numeric, alg.mul(a[0], a[1]), 0)
BINARY(div, Allowed::Real, alg.div(a[0], a[1]), 0)
BINARY(maximum, Allowed::Numeric, alg.maximum(a[0], a[1]), 0)
BINARY(minimum, Allowed::Numeric, alg.minimum(a[0], a[1]), 0)
#undef BINARY

// Comparisons give bool; eq also compares booleans. ORDERED: lt le gt ge.
#define COMPARE(NAME, ALLOWED, ORDERED)                                                           \
  struct K_##NAME : KernelBase {                                                                  \
    static constexpr const char* kName = #NAME;                                                   \
    static constexpr int kArity = 2;                                                              \
    static constexpr Allowed kAllowed = ALLOWED;                                                  \
    static void relate_positions(const std::vector<TensorInfo>& in,                               \
                                 const std::vector<TensorInfo>&, AxisRelations& rel) {            \
      if (all_integer(in)) rel.compared_positions(0, 1, ORDERED);                                 \
    }                                                                                             \
    static std::optional<DType> out_dtype(const AttrMap&, const std::vector<TensorInfo>&) {       \
      return DType::Bool;                                                                         \
    }                                                                                             \
    template <class Alg, class V>                                                                 \
    static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&, \
                   DClass) {                                                                      \
      return alg.NAME(a[0], a[1]);                                                                \
    }                                                                                             \
  };

COMPARE(eq, Allowed::Any, false)
COMPARE(lt, Allowed::Numeric, true)
COMPARE(le, Allowed::Numeric, true)
COMPARE(gt, Allowed::Numeric, true)
COMPARE(ge, Allowed::Numeric, true)
#undef COMPARE

// The uninterpreted functions of the contract.
#define UNINTERPRETED(NAME)                                                                       \
  struct K_##NAME : KernelBase {                                                                  \
    static constexpr const char* kName = #NAME;                                                   \
    static constexpr Allowed kAllowed = Allowed::Real;                                            \
    template <class Alg, class V>                                                                 \
    static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&, \
                   DClass) {                                                                      \
      return alg.call(#NAME, {a[0]});                                                             \
    }                                                                                             \
  };

UNINTERPRETED(exp)
UNINTERPRETED(log)
UNINTERPRETED(sqrt)
UNINTERPRETED(rsqrt)
UNINTERPRETED(tanh)
UNINTERPRETED(sigmoid)
UNINTERPRETED(erf)
UNINTERPRETED(gelu)
UNINTERPRETED(silu)
#undef UNINTERPRETED

struct K_neg : KernelBase {
  static constexpr const char* kName = "neg";
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&,
                 DClass) {
    return alg.neg(a[0]);
  }
};

struct K_relu : KernelBase {
  static constexpr const char* kName = "relu";
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>& cls,
                 DClass) {
    return alg.maximum(a[0], alg.constant(0, cls[0]));
  }
};

struct K_square : KernelBase {
  static constexpr const char* kName = "square";
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&,
                 DClass) {
    return alg.mul(a[0], a[0]);
  }
};

struct K_reciprocal : KernelBase {
  static constexpr const char* kName = "reciprocal";
  static constexpr Allowed kAllowed = Allowed::Real;
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&,
                 DClass) {
    return alg.div(alg.constant(1, DClass::Real), a[0]);  // records a[0] != 0
  }
};

struct K_scale : KernelBase {
  static constexpr const char* kName = "scale";
  static std::vector<AttrRule> rules() { return {{"factor", AttrType::Number, true}}; }
  static std::string check(const AttrMap& attrs, const std::vector<TensorInfo>& in) {
    if (dclass_of(in[0].dtype) == DClass::Int && !attrs.at("factor").is_int())
      return std::string("scale: an integer tensor needs an integer factor, found ") +
             attrs.at("factor").describe() + " for " + describe(in[0]);
    return "";
  }
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap& attrs, const std::vector<V>& a,
                 const std::vector<DClass>& cls, DClass) {
    return alg.mul(a[0], alg.constant(attrs.at("factor").number, cls[0]));
  }
};

struct K_pow : KernelBase {
  static constexpr const char* kName = "pow";
  static std::vector<AttrRule> rules() { return {{"exponent", AttrType::Int, true}}; }
  static std::string check(const AttrMap& attrs, const std::vector<TensorInfo>&) {
    int64_t e = attrs.at("exponent").as_int();
    if (e < 0) return "pow: exponent must be a non-negative integer, found " + std::to_string(e);
    if (e > 64) return "pow: exponent " + std::to_string(e) + " is too large (at most 64)";
    return "";
  }
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap& attrs, const std::vector<V>& a,
                 const std::vector<DClass>& cls, DClass) {
    int64_t e = attrs.at("exponent").as_int();
    if (e == 0) return alg.constant(1, cls[0]);
    V result = a[0];
    for (int64_t i = 1; i < e; ++i) result = alg.mul(result, a[0]);
    return result;
  }
};

struct K_map : KernelBase {
  static constexpr const char* kName = "map";
  static constexpr int kArity = -1;
  static constexpr Allowed kAllowed = Allowed::Real;
  static std::vector<AttrRule> rules() { return {{"fn", AttrType::String, true}}; }
  static std::string check(const AttrMap& attrs, const std::vector<TensorInfo>&) {
    if (attrs.at("fn").text.empty()) return "map: fn must be a non-empty string, found \"\"";
    return "";
  }
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap& attrs, const std::vector<V>& a,
                 const std::vector<DClass>&, DClass) {
    return alg.call(map_function_key(attrs.at("fn").text), a);
  }
};

struct K_where : KernelBase {
  static constexpr const char* kName = "where";
  static constexpr int kArity = 3;
  static constexpr Allowed kAllowed = Allowed::Any;
  static constexpr size_t kFirstValue = 1;
  static std::string check(const AttrMap&, const std::vector<TensorInfo>& in) {
    if (dclass_of(in[0].dtype) != DClass::Bool)
      return "where: input 0 (the condition) must be bool, found " + describe(in[0]);
    return "";
  }
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>&,
                 DClass) {
    return alg.select(a[0], a[1], a[2]);
  }
  // Either branch's positions become the result's.
  static void relate_positions(const std::vector<TensorInfo>& in, const std::vector<TensorInfo>&,
                               AxisRelations& rel) {
    if (dclass_of(in[1].dtype) != DClass::Int) return;
    rel.same_positions(1, 3);
    rel.same_positions(2, 3);
  }
};

struct K_cast : KernelBase {
  static constexpr const char* kName = "cast";
  static constexpr Allowed kAllowed = Allowed::Any;
  static std::vector<AttrRule> rules() { return {{"dtype", AttrType::String, true}}; }
  static std::string check(const AttrMap& attrs, const std::vector<TensorInfo>&) {
    if (!parse_dtype(attrs.at("dtype").text))
      return "cast: dtype must be one of f32, f16, bf16, f64, i32, i64, bool, found " +
             attrs.at("dtype").describe();
    return "";
  }
  static std::optional<DType> out_dtype(const AttrMap& attrs, const std::vector<TensorInfo>&) {
    return parse_dtype(attrs.at("dtype").text);
  }
  template <class Alg, class V>
  static V apply(Alg& alg, const AttrMap&, const std::vector<V>& a, const std::vector<DClass>& cls,
                 DClass out) {
    return alg.cast(a[0], cls[0], out);
  }
  // Integer to integer keeps the values; any other cast of a position is an
  // opaque use (its value would enter real or boolean arithmetic).
  static void relate_positions(const std::vector<TensorInfo>& in,
                               const std::vector<TensorInfo>& out, AxisRelations& rel) {
    if (dclass_of(in[0].dtype) == DClass::Int && dclass_of(out.at(0).dtype) == DClass::Int)
      rel.same_positions(0, 1);
  }
};

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  add_op<Elementwise<K_add>>(r);
  add_op<Elementwise<K_sub>>(r);
  add_op<Elementwise<K_mul>>(r);
  add_op<Elementwise<K_div>>(r);
  add_op<Elementwise<K_maximum>>(r);
  add_op<Elementwise<K_minimum>>(r);
  add_op<Elementwise<K_eq>>(r);
  add_op<Elementwise<K_lt>>(r);
  add_op<Elementwise<K_le>>(r);
  add_op<Elementwise<K_gt>>(r);
  add_op<Elementwise<K_ge>>(r);
  add_op<Elementwise<K_exp>>(r);
  add_op<Elementwise<K_log>>(r);
  add_op<Elementwise<K_sqrt>>(r);
  add_op<Elementwise<K_rsqrt>>(r);
  add_op<Elementwise<K_tanh>>(r);
  add_op<Elementwise<K_sigmoid>>(r);
  add_op<Elementwise<K_erf>>(r);
  add_op<Elementwise<K_gelu>>(r);
  add_op<Elementwise<K_silu>>(r);
  add_op<Elementwise<K_neg>>(r);
  add_op<Elementwise<K_relu>>(r);
  add_op<Elementwise<K_square>>(r);
  add_op<Elementwise<K_reciprocal>>(r);
  add_op<Elementwise<K_scale>>(r);
  add_op<Elementwise<K_pow>>(r);
  add_op<Elementwise<K_map>>(r);
  add_op<Elementwise<K_where>>(r);
  add_op<Elementwise<K_cast>>(r);
}

}  // namespace shardproof::ops
