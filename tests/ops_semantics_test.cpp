// Operator semantics: for every registered operator, random small shapes and
// random rational values are evaluated by the concrete algebra and by the Z3
// algebra (on fresh variables, then the same values substituted and the same
// functions used for the uninterpreted ones); the results must agree exactly.
// The modular algebra of claim inference is checked on the same cases: the
// residues of the inputs give the residues of the concrete results.
// Plus hand-computed values per family and infer() rejections.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"
#include "engine/ops/modular_algebra.h"
#include "engine/ops/op_def.h"
#include "engine/ops/op_registry.h"

namespace shardproof {
namespace {

using Rng = std::mt19937;

// ------------------------------------------------------------------ cases

struct Case {
  AttrMap attrs;
  std::vector<TensorInfo> in;
  size_t n_out = 1;
  // Integer inputs used as indices: values drawn from [0, bound).
  std::map<int, int64_t> index_bound;
};

int64_t uniform(Rng& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool coin(Rng& rng) {
  return uniform(rng, 0, 1) == 1;
}

Shape random_shape(Rng& rng, int min_rank = 0, int max_rank = 3) {
  Shape s;
  int rank = static_cast<int>(uniform(rng, min_rank, max_rank));
  for (int i = 0; i < rank; ++i) s.push_back(uniform(rng, 1, 3));
  return s;
}

// A shape that broadcasts with `s`: a suffix of it with some dims set to 1.
Shape broadcast_partner(Rng& rng, const Shape& s) {
  Shape p(s.begin() + uniform(rng, 0, static_cast<int64_t>(s.size())), s.end());
  for (int64_t& d : p)
    if (uniform(rng, 0, 3) == 0) d = 1;
  return p;
}

Rational random_rational(Rng& rng) {
  Rational r(static_cast<long>(uniform(rng, -6, 6)),
             static_cast<unsigned long>(uniform(rng, 1, 4)));
  r.canonicalize();
  return r;
}

DType real_or_int(Rng& rng) {
  return coin(rng) ? DType::F32 : DType::I64;
}

Attr num(const Rational& r) {
  return Attr::of_number(r);
}

using Generator = std::function<Case(Rng&)>;

std::map<std::string, Generator> generators() {
  std::map<std::string, Generator> g;
  auto binary = [](bool real_only) {
    return [real_only](Rng& rng) {
      Case c;
      DType t = real_only ? DType::F32 : real_or_int(rng);
      Shape a = random_shape(rng);
      Shape b = broadcast_partner(rng, a);
      if (coin(rng)) std::swap(a, b);
      c.in = {{a, t}, {b, t}};
      return c;
    };
  };
  for (const char* op : {"add", "sub", "mul", "maximum", "minimum", "lt", "le", "gt", "ge"})
    g[op] = binary(false);
  g["div"] = binary(true);
  g["eq"] = [](Rng& rng) {
    Case c;
    DType t = uniform(rng, 0, 2) == 0 ? DType::Bool : real_or_int(rng);
    Shape a = random_shape(rng);
    c.in = {{a, t}, {broadcast_partner(rng, a), t}};
    return c;
  };
  auto unary = [](bool real_only) {
    return [real_only](Rng& rng) {
      Case c;
      c.in = {{random_shape(rng), real_only ? DType::F32 : real_or_int(rng)}};
      return c;
    };
  };
  for (const char* op :
       {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu", "silu", "reciprocal"})
    g[op] = unary(true);
  for (const char* op : {"neg", "relu", "square"}) g[op] = unary(false);
  g["scale"] = [](Rng& rng) {
    Case c;
    DType t = real_or_int(rng);
    c.in = {{random_shape(rng), t}};
    c.attrs["factor"] = num(t == DType::I64 ? Rational(static_cast<long>(uniform(rng, -3, 3)))
                                            : random_rational(rng));
    return c;
  };
  g["pow"] = [](Rng& rng) {
    Case c;
    c.in = {{random_shape(rng), real_or_int(rng)}};
    c.attrs["exponent"] = Attr::of_int(uniform(rng, 0, 3));
    return c;
  };
  g["map"] = [](Rng& rng) {
    Case c;
    Shape a = random_shape(rng);
    int n = static_cast<int>(uniform(rng, 1, 3));
    // Arity is part of the fn name here: one fn with two arities is invalid.
    c.attrs["fn"] = Attr::of_string("gelu'" + std::to_string(n));
    for (int i = 0; i < n; ++i)
      c.in.push_back({i == 0 ? a : broadcast_partner(rng, a), DType::F32});
    return c;
  };
  g["where"] = [](Rng& rng) {
    Case c;
    DType t = uniform(rng, 0, 2) == 0 ? DType::Bool : real_or_int(rng);
    Shape a = random_shape(rng);
    c.in = {{broadcast_partner(rng, a), DType::Bool}, {a, t}, {broadcast_partner(rng, a), t}};
    return c;
  };
  g["cast"] = [](Rng& rng) {
    Case c;
    const DType all[] = {DType::F32, DType::F16, DType::I64, DType::I32, DType::Bool};
    c.in = {{random_shape(rng), all[uniform(rng, 0, 4)]}};
    c.attrs["dtype"] = Attr::of_string(dtype_name(all[uniform(rng, 0, 4)]));
    return c;
  };
  g["const"] = [](Rng& rng) {
    Case c;
    c.n_out = 1;
    c.attrs["value"] = num(random_rational(rng));
    c.attrs["shape"] = Attr::of_int_list(random_shape(rng));
    if (coin(rng)) c.attrs["dtype"] = Attr::of_string("f64");
    return c;
  };
  g["iota"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 1);
    c.attrs["shape"] = Attr::of_int_list(s);
    c.attrs["dim"] = Attr::of_int(uniform(rng, -static_cast<int64_t>(s.size()), s.size() - 1));
    return c;
  };
  g["random"] = [](Rng& rng) {  // engine/ops/random.cpp
    Case c;
    Shape s = random_shape(rng), full = s, offset;
    for (int64_t& d : full) d += uniform(rng, 0, 2);
    for (size_t k = 0; k < s.size(); ++k) offset.push_back(uniform(rng, 0, full[k] - s[k]));
    c.in = {{{}, DType::F32}};
    c.attrs["shape"] = Attr::of_int_list(s);
    c.attrs["full"] = Attr::of_int_list(full);
    c.attrs["offset"] = Attr::of_int_list(offset);
    return c;
  };
  g["reshape"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng);
    c.in = {{s, real_or_int(rng)}};
    size_t k = uniform(rng, 0, s.size());
    Shape out = {element_count(Shape(s.begin(), s.begin() + k)),
                 element_count(Shape(s.begin() + k, s.end()))};
    if (coin(rng)) out = {element_count(s)};
    c.attrs["shape"] = Attr::of_int_list(out);
    return c;
  };
  g["transpose"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng);
    c.in = {{s, real_or_int(rng)}};
    std::vector<int64_t> perm(s.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    if (!perm.empty() && coin(rng)) perm[0] -= static_cast<int64_t>(s.size());  // negative dim
    c.attrs["perm"] = Attr::of_int_list(perm);
    return c;
  };
  g["slice"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 1);
    c.in = {{s, real_or_int(rng)}};
    int64_t dim = uniform(rng, 0, s.size() - 1);
    int64_t start = uniform(rng, 0, s[dim]);
    c.attrs["dim"] = Attr::of_int(dim);
    c.attrs["start"] = Attr::of_int(start);
    c.attrs["end"] = Attr::of_int(uniform(rng, start, s[dim]));
    return c;
  };
  g["concat"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 1);
    DType t = real_or_int(rng);
    int64_t dim = uniform(rng, 0, s.size() - 1);
    for (int64_t i = uniform(rng, 1, 3); i > 0; --i) {
      Shape p = s;
      p[dim] = uniform(rng, 1, 3);
      c.in.push_back({p, t});
    }
    c.attrs["dim"] = Attr::of_int(dim - (coin(rng) ? static_cast<int64_t>(s.size()) : 0));
    return c;
  };
  g["split"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 1);
    int64_t dim = uniform(rng, 0, s.size() - 1);
    std::vector<int64_t> sizes;
    int64_t total = 0;
    for (int64_t i = uniform(rng, 1, 3); i > 0; --i) {
      sizes.push_back(uniform(rng, 0, 2));
      total += sizes.back();
    }
    s[dim] = total;
    c.in = {{s, real_or_int(rng)}};
    c.n_out = sizes.size();
    c.attrs["dim"] = Attr::of_int(dim);
    c.attrs["sizes"] = Attr::of_int_list(sizes);
    return c;
  };
  g["expand"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng);
    for (int64_t& d : s)
      if (coin(rng)) d = 1;
    Shape target = s;
    for (int64_t& d : target)
      if (d == 1) d = uniform(rng, 1, 3);
    for (int64_t i = uniform(rng, 0, 1); i > 0; --i) target.insert(target.begin(), 2);
    c.in = {{s, real_or_int(rng)}};
    c.attrs["shape"] = Attr::of_int_list(target);
    return c;
  };
  auto reduction = [](bool real_only) {
    return [real_only](Rng& rng) {
      Case c;
      Shape s = random_shape(rng);
      c.in = {{s, real_only ? DType::F32 : real_or_int(rng)}};
      if (!s.empty() && coin(rng)) {
        std::vector<int64_t> dims;
        for (size_t d = 0; d < s.size(); ++d)
          if (coin(rng)) dims.push_back(coin(rng) ? d : static_cast<int64_t>(d) - s.size());
        if (dims.empty()) dims.push_back(0);
        c.attrs["dims"] = Attr::of_int_list(dims);
      }
      if (coin(rng)) c.attrs["keepdim"] = Attr::of_bool(coin(rng));
      return c;
    };
  };
  g["sum"] = reduction(false);
  g["max"] = reduction(false);
  g["mean"] = reduction(true);
  g["matmul"] = [](Rng& rng) {
    Case c;
    DType t = real_or_int(rng);
    int64_t m = uniform(rng, 1, 3), k = uniform(rng, 1, 3), n = uniform(rng, 1, 3);
    Shape batch = random_shape(rng, 0, 2);
    bool ta = coin(rng), tb = coin(rng);
    Shape a = broadcast_partner(rng, batch), b = broadcast_partner(rng, batch);
    if (coin(rng)) std::swap(a, b);
    a.push_back(ta ? k : m);
    a.push_back(ta ? m : k);
    b.push_back(tb ? n : k);
    b.push_back(tb ? k : n);
    c.in = {{a, t}, {b, t}};
    if (ta || coin(rng)) c.attrs["transpose_a"] = Attr::of_bool(ta);
    if (tb || coin(rng)) c.attrs["transpose_b"] = Attr::of_bool(tb);
    return c;
  };
  auto softmax = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 1);
    c.in = {{s, DType::F32}};
    c.attrs["dim"] = Attr::of_int(uniform(rng, -static_cast<int64_t>(s.size()), s.size() - 1));
    return c;
  };
  g["softmax"] = softmax;
  g["log_softmax"] = softmax;
  auto norm = [](int n_params) {
    return [n_params](Rng& rng) {
      Case c;
      Shape s = random_shape(rng, 1);
      c.in = {{s, DType::F32}};
      for (int i = 0; i < n_params; ++i) c.in.push_back({{s.back()}, DType::F32});
      c.attrs["eps"] = num(Rational(1, static_cast<unsigned long>(uniform(rng, 1, 100))));
      return c;
    };
  };
  g["rmsnorm"] = norm(1);
  g["layernorm"] = norm(2);
  g["embedding"] = [](Rng& rng) {
    Case c;
    int64_t v = uniform(rng, 1, 4);
    c.in = {{random_shape(rng, 0, 2), coin(rng) ? DType::I64 : DType::I32},
            {{v, uniform(rng, 1, 3)}, real_or_int(rng)}};
    c.index_bound[0] = v;
    return c;
  };
  g["gather"] = [](Rng& rng) {
    Case c;
    Shape x = random_shape(rng, 1);
    int64_t dim = uniform(rng, 0, x.size() - 1);
    Shape index = x;
    for (size_t d = 0; d < x.size(); ++d)
      index[d] = static_cast<int64_t>(d) == dim ? uniform(rng, 1, 3) : uniform(rng, 1, x[d]);
    c.in = {{x, real_or_int(rng)}, {index, DType::I64}};
    c.attrs["dim"] = Attr::of_int(dim);
    c.index_bound[1] = x[dim];
    return c;
  };
  g["sgd"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng);
    c.in = {{s, DType::F32}, {s, DType::F32}};
    c.attrs["lr"] = num(random_rational(rng));
    return c;
  };
  g["adam"] = [](Rng& rng) {
    Case c;
    Shape s = random_shape(rng, 0, 2);
    c.in = {{s, DType::F32}, {s, DType::F32}, {s, DType::F32}, {s, DType::F32}};
    c.n_out = 3;
    c.attrs["lr"] = num(Rational(1, static_cast<unsigned long>(uniform(rng, 1, 1000))));
    c.attrs["beta1"] = num(Rational(9, 10));
    Rational beta2(static_cast<long>(uniform(rng, 1, 998)), 999);
    beta2.canonicalize();
    c.attrs["beta2"] = num(beta2);
    c.attrs["eps"] = num(Rational(1, 100000000));
    c.attrs["step"] = Attr::of_int(uniform(rng, 1, 4));
    if (coin(rng)) c.attrs["weight_decay"] = num(random_rational(rng));
    return c;
  };
  // Collectives: n members, one input and one output each.
  auto collective = [](std::function<void(Rng&, Case&, Shape&, DType&, int64_t)> setup) {
    return [setup](Rng& rng) {
      Case c;
      int64_t n = uniform(rng, 1, 3);
      Shape s = random_shape(rng, 1);
      DType t = real_or_int(rng);
      setup(rng, c, s, t, n);
      c.in.assign(n, TensorInfo{s, t});
      c.n_out = n;
      return c;
    };
  };
  g["all_reduce"] = collective([](Rng& rng, Case& c, Shape&, DType& t, int64_t) {
    const char* how[] = {"sum", "max", "mean"};
    int which = static_cast<int>(uniform(rng, 0, 3));
    if (which < 3) c.attrs["reduce"] = Attr::of_string(how[which]);
    if (which == 2) t = DType::F32;
  });
  g["all_gather"] = collective([](Rng& rng, Case& c, Shape& s, DType&, int64_t) {
    c.attrs["dim"] = Attr::of_int(uniform(rng, 0, s.size() - 1));
  });
  g["reduce_scatter"] = collective([](Rng& rng, Case& c, Shape& s, DType& t, int64_t n) {
    int64_t dim = uniform(rng, 0, s.size() - 1);
    s[dim] *= n;
    c.attrs["dim"] = Attr::of_int(dim);
    if (coin(rng)) {
      c.attrs["reduce"] = Attr::of_string(coin(rng) ? "mean" : "max");
      if (c.attrs["reduce"].text == "mean") t = DType::F32;
    }
  });
  g["all_to_all"] = collective([](Rng& rng, Case& c, Shape& s, DType&, int64_t n) {
    int64_t sd = uniform(rng, 0, s.size() - 1), cd = uniform(rng, 0, s.size() - 1);
    s[sd] *= n;
    c.attrs["split_dim"] = Attr::of_int(sd);
    c.attrs["concat_dim"] = Attr::of_int(cd);
  });
  g["broadcast"] = collective([](Rng& rng, Case& c, Shape&, DType&, int64_t n) {
    c.attrs["root"] = Attr::of_int(uniform(rng, 0, n - 1));
  });
  g["send"] = [](Rng& rng) {
    Case c;
    c.in = {{random_shape(rng), real_or_int(rng)}};
    return c;
  };
  return g;
}

// ------------------------------------------------------------------ evaluation

// Evaluates a symbolic term bottom-up under concrete values for the
// variables, computing uninterpreted functions ("uf!name") with the same
// FunctionTable the concrete algebra used. Z3_substitute_funs is not in 4.8.12.
class TermEvaluator {
 public:
  TermEvaluator(z3::context& ctx, FunctionTable& fns) : ctx_(ctx), fns_(fns) {}
  void bind(const z3::expr& var, const Rational& value, DClass cls) {
    values_.emplace(var.decl().name().str(), numeral(value, cls));
  }
  Rational eval(const z3::expr& e) { return to_rational(reduce(e)); }

  z3::expr numeral(const Rational& r, DClass cls) {
    if (cls == DClass::Bool) return ctx_.bool_val(r != 0);
    if (cls == DClass::Int) return ctx_.int_val(r.get_num().get_str().c_str());
    return ctx_.real_val(rational_to_string(r).c_str());
  }

 private:
  z3::expr reduce(const z3::expr& e) {
    auto hit = memo_.find(e.id());
    if (hit != memo_.end()) return hit->second;
    z3::expr result = e;
    if (e.is_app() && !e.is_numeral()) {
      z3::func_decl d = e.decl();
      if (e.num_args() == 0 && d.decl_kind() == Z3_OP_UNINTERPRETED) {
        auto v = values_.find(d.name().str());
        if (v == values_.end()) throw std::runtime_error("unbound variable " + d.name().str());
        result = v->second;
      } else {
        z3::expr_vector args(ctx_);
        for (unsigned i = 0; i < e.num_args(); ++i) args.push_back(reduce(e.arg(i)));
        const std::string name = d.name().str();
        if (d.decl_kind() == Z3_OP_UNINTERPRETED && name.rfind("uf!", 0) == 0) {
          std::vector<Rational> actual;
          for (unsigned i = 0; i < args.size(); ++i) actual.push_back(to_rational(args[i]));
          result = numeral(fns_.call(name.substr(3), actual), DClass::Real);
        } else {
          result = d(args).simplify();
        }
      }
    }
    memo_.emplace(e.id(), result);
    return result;
  }

  Rational to_rational(const z3::expr& v) {
    if (v.is_true()) return 1;
    if (v.is_false()) return 0;
    if (!v.is_numeral()) throw std::runtime_error("not a value: " + v.to_string());
    auto r = parse_exact_number(Z3_get_numeral_string(ctx_, v));
    if (!r) throw std::runtime_error("bad numeral " + v.to_string());
    return *r;
  }

  z3::context& ctx_;
  FunctionTable& fns_;
  std::unordered_map<std::string, z3::expr> values_;
  std::unordered_map<unsigned, z3::expr> memo_;
};

OpCall make_call(const std::string& op, const Case& c, const std::vector<TensorInfo>& out) {
  OpCall call;
  call.op = op;
  call.attrs = c.attrs;
  for (const TensorInfo& t : c.in) call.full_in_shapes.push_back(t.shape);
  for (const TensorInfo& t : out) {
    call.out_shapes.push_back(t.shape);
    call.out_dtypes.push_back(t.dtype);
  }
  for (size_t i = 0; i < c.in.size(); ++i) call.group.push_back(static_cast<int>(i));
  return call;
}

std::string describe_case(const std::string& op, const Case& c) {
  std::string s = op + " attrs {";
  for (const auto& [k, v] : c.attrs) s += k + ": " + v.describe() + ", ";
  s += "} inputs";
  for (const TensorInfo& t : c.in)
    s += std::string(" ") + dtype_name(t.dtype) + shape_to_string(t.shape);
  return s;
}

// Arguments of an uninterpreted function that are no small rationals: the
// residues cannot stand for the concrete values, so there is nothing to compare.
struct NotSmall : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The modular algebra (claim inference) on the residues of the same inputs,
// with the same functions, gives the residues of the concrete results.
void check_modular(const OpDef* def, const OpCall& call, const std::vector<Tensor<Rational>>& cin,
                   const std::vector<Tensor<Rational>>& expected, FunctionTable& fns,
                   const std::string& what) {
  ModularAlgebra malg([&fns](const std::string& fn, const std::vector<uint64_t>& args) {
    std::vector<Rational> values;
    for (uint64_t a : args) {
      int64_t num = 0, den = 1;
      if (!ModularAlgebra::small_rational(a, num, den)) throw NotSmall(fn);
      values.push_back(Rational(static_cast<long>(num)) / Rational(static_cast<long>(den)));
    }
    return ModularAlgebra::of(fns.call(fn, values));
  });
  std::vector<Tensor<uint64_t>> min;
  for (const Tensor<Rational>& t : cin) {
    Tensor<uint64_t> m;
    m.shape = t.shape;
    m.cls = t.cls;
    for (const Rational& r : t.data) m.data.push_back(ModularAlgebra::of(r));
    min.push_back(std::move(m));
  }
  std::vector<Tensor<uint64_t>> mout;
  try {
    mout = def->eval(malg, call, min);
  } catch (const NotSmall&) {
    return;
  }
  ASSERT_EQ(mout.size(), expected.size()) << what;
  for (size_t o = 0; o < mout.size(); ++o) {
    ASSERT_EQ(mout[o].shape, expected[o].shape) << what;
    ASSERT_EQ(mout[o].size(), expected[o].size()) << what;
    for (int64_t k = 0; k < mout[o].size(); ++k)
      EXPECT_EQ(mout[o].data[k], ModularAlgebra::of(expected[o].data[k]))
          << what << " output " << o << " element " << k << ": concrete "
          << rational_to_string(expected[o].data[k]) << ", modular (signed) "
          << ModularAlgebra::signed_value(mout[o].data[k]);
  }
}

// Runs one case; returns false when the values leave the op's domain
// (concrete EvalError), true when both algebras were compared.
bool check_case(const std::string& op, const Case& c, Rng& rng) {
  const OpDef* def = OpRegistry::instance().find(op);
  std::vector<TensorInfo> out;
  std::string err = def->infer(c.attrs, c.in, c.n_out, out);
  EXPECT_EQ(err, "") << describe_case(op, c);
  if (!err.empty()) return false;
  EXPECT_EQ(out.size(), c.n_out);
  OpCall call = make_call(op, c, out);

  // Random values, the same for both algebras.
  std::vector<Tensor<Rational>> cin;
  for (size_t i = 0; i < c.in.size(); ++i) {
    Tensor<Rational> t;
    t.shape = c.in[i].shape;
    t.cls = dclass_of(c.in[i].dtype);
    for (int64_t k = 0; k < element_count(t.shape); ++k) {
      if (c.index_bound.count(static_cast<int>(i)))
        t.data.push_back(Rational(static_cast<long>(uniform(rng, 0, c.index_bound.at(i) - 1))));
      else if (t.cls == DClass::Bool)
        t.data.push_back(Rational(static_cast<long>(uniform(rng, 0, 1))));
      else if (t.cls == DClass::Int)
        t.data.push_back(Rational(static_cast<long>(uniform(rng, -5, 5))));
      else
        t.data.push_back(random_rational(rng));
    }
    cin.push_back(t);
  }
  PseudoRandomFunctions fns;
  ConcreteAlgebra calg(fns);
  std::vector<Tensor<Rational>> cout_;
  try {
    cout_ = def->eval(calg, call, cin);
  } catch (const EvalError&) {
    return false;
  }

  check_modular(def, call, cin, cout_, fns, describe_case(op, c));

  z3::context ctx;
  Z3Algebra zalg(ctx);
  TermEvaluator ev(ctx, fns);
  std::vector<Tensor<z3::expr>> zin;
  for (size_t i = 0; i < cin.size(); ++i) {
    Tensor<z3::expr> t;
    t.shape = cin[i].shape;
    t.cls = cin[i].cls;
    for (int64_t k = 0; k < cin[i].size(); ++k) {
      z3::expr v = zalg.variable("in" + std::to_string(i) + "_" + std::to_string(k), t.cls);
      if (c.index_bound.count(static_cast<int>(i))) zalg.trust_as_index(v);
      ev.bind(v, cin[i].data[k], t.cls);
      t.data.push_back(v);
    }
    zin.push_back(t);
  }
  std::vector<Tensor<z3::expr>> zout = def->eval(zalg, call, zin);

  const std::string what = describe_case(op, c);
  EXPECT_EQ(cout_.size(), out.size()) << what;
  EXPECT_EQ(zout.size(), out.size()) << what;
  if (cout_.size() != out.size() || zout.size() != out.size()) return true;
  for (size_t o = 0; o < out.size(); ++o) {
    EXPECT_EQ(cout_[o].shape, out[o].shape) << what << " output " << o;
    EXPECT_EQ(zout[o].shape, out[o].shape) << what << " output " << o;
    EXPECT_EQ(cout_[o].cls, dclass_of(out[o].dtype)) << what << " output " << o;
    EXPECT_EQ(zout[o].cls, dclass_of(out[o].dtype)) << what << " output " << o;
    if (cout_[o].size() != element_count(out[o].shape) || zout[o].size() != cout_[o].size()) {
      ADD_FAILURE() << what << ": output " << o << " has the wrong number of elements";
      continue;
    }
    for (int64_t k = 0; k < cout_[o].size(); ++k) {
      // The symbolic term has the sort of the output's class.
      const z3::expr& term = zout[o].data[k];
      const DClass cls = dclass_of(out[o].dtype);
      EXPECT_TRUE(cls == DClass::Bool  ? term.is_bool()
                  : cls == DClass::Int ? term.is_int()
                                       : term.is_real())
          << what << " output " << o << " element " << k << " has sort " << term.get_sort();
      Rational symbolic = ev.eval(term);
      EXPECT_EQ(symbolic, cout_[o].data[k])
          << what << " output " << o << " element " << k << ": symbolic "
          << rational_to_string(symbolic) << " vs concrete "
          << rational_to_string(cout_[o].data[k]);
    }
  }
  // Values on which the concrete evaluation succeeded satisfy every side condition.
  for (const z3::expr& a : zalg.assumptions()) EXPECT_EQ(ev.eval(a), 1) << what << " " << a;
  for (const z3::expr& a : zalg.obligations()) EXPECT_EQ(ev.eval(a), 1) << what << " " << a;
  return true;
}

TEST(OpsSemantics, EveryOperatorHasARandomCase) {
  auto gens = generators();
  for (const std::string& name : OpRegistry::instance().names())
    EXPECT_TRUE(gens.count(name)) << "no random semantics case for operator '" << name << "'";
  for (const auto& [name, gen] : gens)
    EXPECT_NE(OpRegistry::instance().find(name), nullptr) << "case for unregistered op " << name;
}

TEST(OpsSemantics, ConcreteAndSymbolicAgreeOnRandomCases) {
  auto gens = generators();
  for (const auto& [name, gen] : gens) {
    if (!OpRegistry::instance().find(name)) continue;
    Rng rng(std::hash<std::string>{}(name)&0xffffffff);
    int compared = 0;
    for (int trial = 0; trial < 12; ++trial) {
      Case c = gen(rng);
      if (check_case(name, c, rng)) ++compared;
      if (::testing::Test::HasFailure()) return;  // one clear failure, not hundreds
    }
    EXPECT_GE(compared, 4) << name << ": too few cases inside the op's domain";
  }
}

// ------------------------------------------------------------------ hand-computed

// A known function table: exp(x) = x + 1, log(x) = 2x, anything else 0.
class KnownFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    if (fn == "exp") return args.at(0) + 1;
    if (fn == "log") return 2 * args.at(0);
    if (fn == "rsqrt") return 1 / args.at(0);
    return 0;
  }
};

Tensor<Rational> tensor(Shape shape, std::vector<Rational> data, DClass cls = DClass::Real) {
  Tensor<Rational> t;
  t.shape = std::move(shape);
  t.cls = cls;
  t.data = std::move(data);
  return t;
}

std::vector<Tensor<Rational>> run(const std::string& op, AttrMap attrs,
                                  const std::vector<Tensor<Rational>>& in, FunctionTable& fns,
                                  std::vector<Shape> full = {}, size_t n_out = 1) {
  const OpDef* def = OpRegistry::instance().find(op);
  EXPECT_NE(def, nullptr) << op;
  std::vector<TensorInfo> info, out;
  for (const auto& t : in)
    info.push_back({t.shape, t.cls == DClass::Real  ? DType::F32
                             : t.cls == DClass::Int ? DType::I64
                                                    : DType::Bool});
  EXPECT_EQ(def->infer(attrs, info, n_out, out), "");
  Case c;
  c.attrs = attrs;
  c.in = info;
  OpCall call = make_call(op, c, out);
  if (!full.empty()) call.full_in_shapes = full;
  ConcreteAlgebra alg(fns);
  return def->eval(alg, call, in);
}

std::vector<Rational> R(std::initializer_list<std::string> texts) {
  std::vector<Rational> out;
  for (const auto& t : texts) out.push_back(*parse_exact_number(t));
  return out;
}

TEST(OpsHandComputed, Matmul) {
  PseudoRandomFunctions fns;
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]]
  auto a = tensor({2, 2}, R({"1", "2", "3", "4"})), b = tensor({2, 2}, R({"5", "6", "7", "8"}));
  EXPECT_EQ(run("matmul", {}, {a, b}, fns)[0].data, R({"19", "22", "43", "50"}));
  // a^T b = [[1,3],[2,4]] x b = [[26,30],[38,44]]
  AttrMap ta{{"transpose_a", Attr::of_bool(true)}};
  EXPECT_EQ(run("matmul", ta, {a, b}, fns)[0].data, R({"26", "30", "38", "44"}));
  // Batch broadcasting: [2,1,2] x [2,2] -> [2,1,2]
  auto batch = tensor({2, 1, 2}, R({"1", "0", "0", "1/2"}));
  auto r = run("matmul", {}, {batch, b}, fns)[0];
  EXPECT_EQ(r.shape, (Shape{2, 1, 2}));
  EXPECT_EQ(r.data, R({"5", "6", "7/2", "4"}));
}

TEST(OpsHandComputed, SoftmaxWithKnownFunctions) {
  KnownFunctions fns;
  // exp(x - max) = x - max + 1: for [1, 3]: max 3, e = [-1, 1], sum 0 -> division by zero.
  auto x = tensor({1, 2}, R({"1", "3"}));
  EXPECT_THROW(run("softmax", {{"dim", Attr::of_int(-1)}}, {x}, fns), EvalError);
  // [2, 3]: max 3, e = [0, 1], sum 1 -> [0, 1]
  auto y = tensor({2}, R({"2", "3"}));
  EXPECT_EQ(run("softmax", {{"dim", Attr::of_int(0)}}, {y}, fns)[0].data, R({"0", "1"}));
  // [1, 2, 3]: e = [-1, 0, 1] + ... max 3: e = [-1, 0, 1], sum 0 -> throws; use [3, 3, 1]:
  // e = [1, 1, -1], sum 1 -> [1, 1, -1]
  auto z = tensor({3}, R({"3", "3", "1"}));
  EXPECT_EQ(run("softmax", {{"dim", Attr::of_int(0)}}, {z}, fns)[0].data, R({"1", "1", "-1"}));
  // log_softmax [3, 3, 1]: (x - 3) - log(1) = x - 3 - 2 = [-2, -2, -4]
  EXPECT_EQ(run("log_softmax", {{"dim", Attr::of_int(0)}}, {z}, fns)[0].data,
            R({"-2", "-2", "-4"}));
}

TEST(OpsHandComputed, MeanDividesByFullCount) {
  PseudoRandomFunctions fns;
  auto x = tensor({2}, R({"3", "5"}));
  // As if reduced from [8]: the divisor stays 8.
  EXPECT_EQ(run("mean", {}, {x}, fns, {{8}})[0].data, R({"1"}));
  EXPECT_EQ(run("mean", {}, {x}, fns, {{2}})[0].data, R({"4"}));
  // Only the reduced dims count: [2, 2] from full [2, 6], mean over dim 1 divides by 6.
  auto m = tensor({2, 2}, R({"1", "5", "6", "6"}));
  EXPECT_EQ(run("mean", {{"dims", Attr::of_int_list({1})}}, {m}, fns, {{2, 6}})[0].data,
            R({"1", "2"}));
  // Symbolically too: the term divides by 8.
  z3::context ctx;
  Z3Algebra alg(ctx);
  OpCall call;
  call.op = "mean";
  call.full_in_shapes = {{8}};
  call.out_shapes = {{}};
  call.out_dtypes = {DType::F32};
  Tensor<z3::expr> zx;
  zx.shape = {2};
  zx.data = {alg.variable("a", DClass::Real), alg.variable("b", DClass::Real)};
  auto r = OpRegistry::instance().find("mean")->eval(alg, call, {zx});
  z3::solver s(ctx);
  s.add(r[0].data[0] != (zx.data[0] + zx.data[1]) / ctx.real_val(8));
  EXPECT_EQ(s.check(), z3::unsat);
  EXPECT_TRUE(alg.assumptions().empty());  // division by a nonzero numeral
  // A call without full shapes is a caller bug, not a silent fallback.
  call.full_in_shapes.clear();
  EXPECT_THROW(OpRegistry::instance().find("mean")->eval(alg, call, {zx}), std::logic_error);
}

TEST(OpsHandComputed, NormsUseFullCount) {
  KnownFunctions fns;  // rsqrt(v) = 1/v
  auto x = tensor({2}, R({"1", "3"}));
  auto w = tensor({2}, R({"1", "2"}));
  // rmsnorm: mean(x*x) over full count 4 = 10/4; + eps 0 -> rsqrt = 2/5; x*r*w = [2/5, 12/5]
  AttrMap eps0{{"eps", Attr::of_number(0)}};
  EXPECT_EQ(run("rmsnorm", eps0, {x, w}, fns, {{4}, {4}})[0].data, R({"2/5", "12/5"}));
  // layernorm at full count 2: mu 2, d = [-1, 1], var 1, eps 1 -> rsqrt 1/2;
  // d * 1/2 * w + b = [-1/2, 1] + [10, 20]
  auto b = tensor({2}, R({"10", "20"}));
  AttrMap eps1{{"eps", Attr::of_number(1)}};
  EXPECT_EQ(run("layernorm", eps1, {x, w, b}, fns)[0].data, R({"19/2", "21"}));
}

TEST(OpsHandComputed, Collectives) {
  PseudoRandomFunctions fns;
  auto a = tensor({2}, R({"1", "2"})), b = tensor({2}, R({"3", "8"}));
  auto sum = run("all_reduce", {}, {a, b}, fns, {}, 2);
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0].data, R({"4", "10"}));
  EXPECT_EQ(sum[1].data, R({"4", "10"}));
  auto mean = run("all_reduce", {{"reduce", Attr::of_string("mean")}}, {a, b}, fns, {}, 2);
  EXPECT_EQ(mean[1].data, R({"2", "5"}));
  auto mx = run("all_reduce", {{"reduce", Attr::of_string("max")}}, {a, b}, fns, {}, 2);
  EXPECT_EQ(mx[0].data, R({"3", "8"}));
  auto gathered = run("all_gather", {{"dim", Attr::of_int(0)}}, {a, b}, fns, {}, 2);
  EXPECT_EQ(gathered[1].data, R({"1", "2", "3", "8"}));
  auto rs = run("reduce_scatter", {{"dim", Attr::of_int(0)}}, {a, b}, fns, {}, 2);
  EXPECT_EQ(rs[0].data, R({"4"}));
  EXPECT_EQ(rs[1].data, R({"10"}));
  auto bc = run("broadcast", {{"root", Attr::of_int(1)}}, {a, b}, fns, {}, 2);
  EXPECT_EQ(bc[0].data, b.data);
  // all_to_all: input i = [i0, i1]; output j = [piece j of input 0, piece j of input 1].
  AttrMap a2a{{"split_dim", Attr::of_int(0)}, {"concat_dim", Attr::of_int(0)}};
  auto t = run("all_to_all", a2a, {a, b}, fns, {}, 2);
  EXPECT_EQ(t[0].data, R({"1", "3"}));
  EXPECT_EQ(t[1].data, R({"2", "8"}));
  EXPECT_TRUE(OpRegistry::instance().find("all_to_all")->collective());
  EXPECT_FALSE(OpRegistry::instance().find("add")->collective());
}

TEST(OpsHandComputed, IndexingAndConstants) {
  PseudoRandomFunctions fns;
  auto ids = tensor({3}, R({"2", "0", "2"}), DClass::Int);
  auto table = tensor({3, 2}, R({"1", "2", "3", "4", "5", "6"}));
  EXPECT_EQ(run("embedding", {}, {ids, table}, fns)[0].data, R({"5", "6", "1", "2", "5", "6"}));
  auto bad = tensor({1}, R({"3"}), DClass::Int);
  EXPECT_THROW(run("embedding", {}, {bad, table}, fns), EvalError);
  // gather dim 1: out[i][j] = x[i][index[i][j]]
  auto x = tensor({2, 3}, R({"10", "11", "12", "20", "21", "22"}));
  auto index = tensor({2, 2}, R({"2", "0", "1", "1"}), DClass::Int);
  EXPECT_EQ(run("gather", {{"dim", Attr::of_int(1)}}, {x, index}, fns)[0].data,
            R({"12", "10", "21", "21"}));
  auto iota =
      run("iota", {{"shape", Attr::of_int_list({2, 3})}, {"dim", Attr::of_int(1)}}, {}, fns);
  EXPECT_EQ(iota[0].data, R({"0", "1", "2", "0", "1", "2"}));
  EXPECT_EQ(iota[0].cls, DClass::Int);
  auto c =
      run("const", {{"shape", Attr::of_int_list({2})}, {"value", Attr::of_number(Rational(1, 3))}},
          {}, fns);
  EXPECT_EQ(c[0].data, R({"1/3", "1/3"}));
  auto cast =
      run("cast", {{"dtype", Attr::of_string("i32")}}, {tensor({3}, R({"-3/2", "7/2", "2"}))}, fns);
  EXPECT_EQ(cast[0].data, R({"-2", "3", "2"}));
}

TEST(OpsHandComputed, Optimizers) {
  PseudoRandomFunctions fns;
  auto p = tensor({1}, R({"1"})), g = tensor({1}, R({"2"}));
  EXPECT_EQ(run("sgd", {{"lr", Attr::of_number(Rational(1, 10))}}, {p, g}, fns)[0].data,
            R({"4/5"}));
  // adam with sqrt(v) := the table's "sqrt"; check m', v' exactly and p' by formula.
  auto m = tensor({1}, R({"1/2"})), v = tensor({1}, R({"1/4"}));
  AttrMap at{{"lr", Attr::of_number(Rational(1, 10))},
             {"beta1", Attr::of_number(Rational(1, 2))},
             {"beta2", Attr::of_number(Rational(3, 4))},
             {"eps", Attr::of_number(Rational(1, 8))},
             {"step", Attr::of_int(1)},
             {"weight_decay", Attr::of_number(Rational(1, 5))}};
  auto r = run("adam", at, {p, g, m, v}, fns, {}, 3);
  ASSERT_EQ(r.size(), 3u);
  Rational m2 = Rational(1, 2) * Rational(1, 2) + Rational(1, 2) * 2;      // 5/4
  Rational v2 = Rational(3, 4) * Rational(1, 4) + Rational(1, 4) * 2 * 2;  // 19/16
  EXPECT_EQ(r[1].data[0], m2);
  EXPECT_EQ(r[2].data[0], v2);
  Rational sq = fns.call("sqrt", {v2 / Rational(1, 4)});
  Rational expected =
      1 - Rational(1, 10) * ((m2 / Rational(1, 2)) / (sq + Rational(1, 8)) + Rational(1, 5) * 1);
  EXPECT_EQ(r[0].data[0], expected);
}

// ------------------------------------------------------------------ infer rejections

std::string infer_error(const std::string& op, AttrMap attrs, std::vector<TensorInfo> in,
                        size_t n_out = 1) {
  std::vector<TensorInfo> out;
  return OpRegistry::instance().find(op)->infer(attrs, in, n_out, out);
}

void expect_error(const std::string& err, std::initializer_list<const char*> parts) {
  EXPECT_FALSE(err.empty());
  for (const char* p : parts) EXPECT_NE(err.find(p), std::string::npos) << err << " lacks " << p;
}

TEST(OpsInfer, RejectsBadAttributes) {
  TensorInfo x{{4, 5}, DType::F32};
  expect_error(infer_error("add", {{"alpha", Attr::of_int(1)}}, {x, x}),
               {"add", "unknown attribute", "alpha"});
  expect_error(infer_error("softmax", {}, {x}), {"softmax", "missing", "dim"});
  expect_error(infer_error("softmax", {{"dim", Attr::of_string("x")}}, {x}), {"dim", "integer"});
  expect_error(infer_error("softmax", {{"dim", Attr::of_int(2)}}, {x}), {"out of range", "[4, 5]"});
  EXPECT_EQ(infer_error("softmax", {{"dim", Attr::of_int(-2)}}, {x}), "");
  expect_error(infer_error("sum", {{"dims", Attr::of_int_list({0, -2})}}, {x}), {"twice"});
  expect_error(infer_error("sum", {{"keepdim", Attr::of_int(1)}}, {x}), {"keepdim", "boolean"});
  expect_error(infer_error("pow", {{"exponent", Attr::of_int(-1)}}, {x}), {"non-negative"});
  expect_error(infer_error("pow", {{"exponent", Attr::of_number(Rational(1, 2))}}, {x}),
               {"exponent", "integer"});
  expect_error(infer_error("transpose", {{"perm", Attr::of_int_list({0, 0})}}, {x}),
               {"permutation"});
  expect_error(
      infer_error("slice",
                  {{"dim", Attr::of_int(0)}, {"start", Attr::of_int(2)}, {"end", Attr::of_int(6)}},
                  {x}),
      {"end", "6"});
  expect_error(
      infer_error("split", {{"dim", Attr::of_int(1)}, {"sizes", Attr::of_int_list({2, 2})}}, {x},
                  2),
      {"add up to 4", "size 5"});
  expect_error(infer_error("cast", {{"dtype", Attr::of_string("f128")}}, {x}), {"f128"});
  expect_error(infer_error("all_reduce", {{"reduce", Attr::of_string("prod")}}, {x, x}, 2),
               {"prod"});
  expect_error(infer_error("adam",
                           {{"lr", Attr::of_number(1)},
                            {"beta1", Attr::of_number(1)},
                            {"beta2", Attr::of_number(Rational(1, 2))},
                            {"eps", Attr::of_number(0)},
                            {"step", Attr::of_int(1)}},
                           {x, x, x, x}, 3),
               {"beta1"});
}

TEST(OpsInfer, RejectsBadShapes) {
  TensorInfo a{{8, 16}, DType::F32}, b{{12, 4}, DType::F32};
  EXPECT_EQ(infer_error("matmul", {}, {a, b}),
            "matmul: contraction sizes differ: a is [8, 16] (k=16), b is [12, 4] (k=12)");
  expect_error(infer_error("add", {}, {a, {{12}, DType::F32}}), {"[8, 16]", "[12]", "broadcast"});
  expect_error(infer_error("reshape", {{"shape", Attr::of_int_list({7})}}, {a}), {"128", "7"});
  expect_error(infer_error("expand", {{"shape", Attr::of_int_list({3, 16})}}, {a}), {"broadcast"});
  expect_error(infer_error("concat", {{"dim", Attr::of_int(0)}}, {a, b}), {"[12, 4]", "[8, 16]"});
  expect_error(infer_error("add", {}, {a}), {"expected 2 inputs", "found 1"});
  expect_error(infer_error("rmsnorm", {{"eps", Attr::of_number(0)}}, {a, {{8}, DType::F32}}),
               {"[16]", "[8]"});
  expect_error(
      infer_error("reduce_scatter", {{"dim", Attr::of_int(1)}},
                  {{{12, 4}, DType::F32}, {{12, 4}, DType::F32}, {{12, 4}, DType::F32}}, 3),
      {"3 equal pieces"});
  expect_error(infer_error("all_gather", {{"dim", Attr::of_int(0)}}, {a, b}, 2), {"same shape"});
  expect_error(infer_error("all_reduce", {}, {a, a}, 1), {"one output per group member"});
  expect_error(infer_error("gather", {{"dim", Attr::of_int(0)}}, {a, {{8}, DType::I64}}), {"rank"});
}

TEST(OpsInfer, RejectsBadDtypes) {
  TensorInfo i{{4}, DType::I64}, f{{4}, DType::F32}, bl{{4}, DType::Bool};
  expect_error(infer_error("div", {}, {i, i}), {"div", "integers", "invalid", "i64"});
  for (const char* op :
       {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu", "silu", "reciprocal"})
    expect_error(infer_error(op, {}, {i}), {op, "integers", "invalid"});
  expect_error(infer_error("map", {{"fn", Attr::of_string("f")}}, {i}), {"integers"});
  expect_error(infer_error("mean", {}, {i}), {"integers"});
  expect_error(infer_error("add", {}, {i, f}), {"one dtype class", "i64", "f32"});
  expect_error(infer_error("where", {}, {f, f, f}), {"condition", "bool"});
  expect_error(infer_error("where", {}, {bl, f, i}), {"one dtype class"});
  expect_error(infer_error("embedding", {}, {f, {{4, 2}, DType::F32}}), {"integer"});
  expect_error(infer_error("scale", {{"factor", Attr::of_number(Rational(1, 2))}}, {i}),
               {"integer factor"});
  expect_error(infer_error("add", {}, {bl, bl}), {"booleans"});

  std::vector<TensorInfo> out;
  EXPECT_EQ(OpRegistry::instance().find("lt")->infer({}, {i, i}, 1, out), "");
  EXPECT_EQ(out[0].dtype, DType::Bool);
  EXPECT_EQ(OpRegistry::instance().find("iota")->infer(
                {{"shape", Attr::of_int_list({2})}, {"dim", Attr::of_int(0)}}, {}, 1, out),
            "");
  EXPECT_EQ(out[0].dtype, DType::I64);
  EXPECT_EQ(OpRegistry::instance().find("const")->infer(
                {{"shape", Attr::of_int_list({})}, {"value", Attr::of_number(Rational(1, 2))}}, {},
                1, out),
            "");
  EXPECT_EQ(out[0].dtype, DType::F32);
}

// ------------------------------------------------------------------ axes and reduce_attrs

struct RecordedRelations : AxisRelations {
  std::vector<std::string> log;
  static std::string s(AxisRef a) { return std::to_string(a.slot) + "." + std::to_string(a.dim); }
  void same(AxisRef a, AxisRef b) override { log.push_back("same " + s(a) + " " + s(b)); }
  void sub_range(AxisRef part, AxisRef whole, int64_t offset) override {
    log.push_back("sub " + s(part) + " " + s(whole) + " @" + std::to_string(offset));
  }
  void freeze(AxisRef a) override { log.push_back("freeze " + s(a)); }
  void product(AxisRef whole, const std::vector<AxisRef>& factors) override {
    std::string entry = "product " + s(whole);
    for (AxisRef f : factors) entry += " " + s(f);
    log.push_back(entry);
  }
  void combine(AxisRef a) override { log.push_back("combine " + s(a)); }
  bool has(const std::string& entry) const {
    return std::find(log.begin(), log.end(), entry) != log.end();
  }
};

RecordedRelations relations(const std::string& op, AttrMap attrs, std::vector<TensorInfo> in,
                            size_t n_out = 1) {
  std::vector<TensorInfo> out;
  const OpDef* def = OpRegistry::instance().find(op);
  EXPECT_EQ(def->infer(attrs, in, n_out, out), "");
  RecordedRelations rel;
  def->relate_axes(attrs, in, out, rel);
  return rel;
}

TEST(OpsAxes, RelationsPerFamily) {
  TensorInfo a{{8, 16}, DType::F32}, w{{16, 4}, DType::F32}, row{{1, 16}, DType::F32};
  auto mm = relations("matmul", {}, {a, w});
  EXPECT_TRUE(mm.has("same 0.0 2.0"));
  EXPECT_TRUE(mm.has("same 1.1 2.1"));
  EXPECT_TRUE(mm.has("same 0.1 1.0"));
  auto mt = relations("matmul", {{"transpose_b", Attr::of_bool(true)}}, {a, {{4, 16}, DType::F32}});
  EXPECT_TRUE(mt.has("same 1.0 2.1"));
  EXPECT_TRUE(mt.has("same 0.1 1.1"));
  auto add = relations("add", {}, {a, row});
  EXPECT_TRUE(add.has("same 0.0 2.0"));
  EXPECT_TRUE(add.has("same 1.1 2.1"));
  EXPECT_FALSE(add.has("same 1.0 2.0"));  // broadcast dim: no relation
  auto sl = relations(
      "slice", {{"dim", Attr::of_int(1)}, {"start", Attr::of_int(4)}, {"end", Attr::of_int(8)}},
      {a});
  EXPECT_TRUE(sl.has("sub 1.1 0.1 @4"));
  EXPECT_TRUE(sl.has("same 0.0 1.0"));
  auto cat = relations("concat", {{"dim", Attr::of_int(0)}}, {a, a});
  EXPECT_TRUE(cat.has("sub 1.0 2.0 @8"));
  auto rs = relations("reshape", {{"shape", Attr::of_int_list({8, 4, 4})}}, {a});
  EXPECT_TRUE(rs.has("same 0.0 1.0"));
  EXPECT_TRUE(rs.has("product 0.1 1.1 1.2"));  // 16 = 4 x 4, row-major
  auto merge = relations("reshape", {{"shape", Attr::of_int_list({128})}}, {a});
  EXPECT_TRUE(merge.has("product 1.0 0.0 0.1"));
  auto mixed = relations("reshape", {{"shape", Attr::of_int_list({4, 32})}}, {a});
  EXPECT_TRUE(mixed.has("freeze 0.0"));  // 8x16 -> 4x32: no factor-wise map
  EXPECT_TRUE(mixed.has("freeze 1.1"));
  EXPECT_TRUE(mm.has("combine 0.1"));
  auto sum = relations("sum", {{"dims", Attr::of_int_list({0})}}, {a});
  EXPECT_TRUE(sum.has("same 0.1 1.0"));
  auto tr = relations("transpose", {{"perm", Attr::of_int_list({1, 0})}}, {a});
  EXPECT_TRUE(tr.has("same 0.1 1.0"));
  auto emb = relations("embedding", {}, {{{2, 3}, DType::I64}, w});
  EXPECT_TRUE(emb.has("freeze 1.0"));
  EXPECT_TRUE(emb.has("same 1.1 2.2"));
  auto ag = relations("all_gather", {{"dim", Attr::of_int(0)}}, {a, a}, 2);
  EXPECT_TRUE(ag.has("sub 1.0 3.0 @8"));
  auto rsc = relations("reduce_scatter", {{"dim", Attr::of_int(1)}}, {a, a}, 2);
  EXPECT_TRUE(rsc.has("sub 3.1 0.1 @8"));
  auto io =
      relations("iota", {{"shape", Attr::of_int_list({4, 5})}, {"dim", Attr::of_int(-1)}}, {});
  EXPECT_TRUE(io.has("freeze 0.1"));
  EXPECT_FALSE(io.has("freeze 0.0"));
}

TEST(OpsAxes, ReduceAttrsRewritesSizes) {
  auto position = [](AxisRef, int64_t p) { return p / 4; };
  const OpDef* slice = OpRegistry::instance().find("slice");
  AttrMap s{{"dim", Attr::of_int(1)}, {"start", Attr::of_int(8)}, {"end", Attr::of_int(16)}};
  AttrMap r = slice->reduce_attrs(s, {{8, 4}}, {{8, 2}}, position);
  EXPECT_EQ(r.at("start").as_int(), 2);
  EXPECT_EQ(r.at("end").as_int(), 4);
  const OpDef* split = OpRegistry::instance().find("split");
  r = split->reduce_attrs({{"dim", Attr::of_int(0)}, {"sizes", Attr::of_int_list({4, 12})}}, {{4}},
                          {{1}, {3}}, position);
  EXPECT_EQ(r.at("sizes").as_int_list(), (std::vector<int64_t>{1, 3}));
  const OpDef* reshape = OpRegistry::instance().find("reshape");
  r = reshape->reduce_attrs({{"shape", Attr::of_int_list({8, 16})}}, {{2, 2, 4}}, {{2, 8}},
                            position);
  EXPECT_EQ(r.at("shape").as_int_list(), (std::vector<int64_t>{2, 8}));
  const OpDef* add = OpRegistry::instance().find("add");
  AttrMap none;
  EXPECT_TRUE(add->reduce_attrs(none, {{2}, {2}}, {{2}}, position).empty());
}

}  // namespace
}  // namespace shardproof
