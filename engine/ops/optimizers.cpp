// Optimizer steps, elementwise over a parameter and its state: sgd, adam.
#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

namespace {

template <class V>
using Tensors = std::vector<Tensor<V>>;

std::string check_state(const std::string& op, const std::vector<TensorInfo>& in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (auto e = check_class(op, in, i, Allowed::Real); !e.empty()) return e;
  return check_same_shape(op, in);
}

void relate_identity(const std::vector<TensorInfo>& in, const std::vector<TensorInfo>& out,
                     AxisRelations& rel) {
  const int n = int(in.size());
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < int(out.size()); ++o)
      for (int d = 0; d < int(in[i].shape.size()); ++d) rel.same({i, d}, {n + o, d});
}

struct Sgd {
  static std::string name() { return "sgd"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("sgd", attrs, {{"lr", AttrType::Number, true}}); !e.empty()) return e;
    if (auto e = check_input_count("sgd", in, 2); !e.empty()) return e;
    if (auto e = check_output_count("sgd", n_out, 1); !e.empty()) return e;
    if (auto e = check_state("sgd", in); !e.empty()) return e;
    out = {in[0]};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const V lr = alg.constant(call.attrs.at("lr").number, DClass::Real);
    return {elementwise(pointers(in), in[0].shape, in[0].cls,
                        [&](const std::vector<V>& a) { return alg.sub(a[0], alg.mul(lr, a[1])); })};
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_identity(in, out, rel);
  }
};

Rational power(const Rational& b, int64_t e) {
  Rational r = 1;
  for (int64_t i = 0; i < e; ++i) r *= b;
  return r;
}

// AdamW: inputs p, g, m, v; outputs p', m', v'.
struct Adam {
  static std::string name() { return "adam"; }
  static std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                           std::vector<TensorInfo>& out) {
    if (auto e = check_attrs("adam", attrs,
                             {{"lr", AttrType::Number, true},
                              {"beta1", AttrType::Number, true},
                              {"beta2", AttrType::Number, true},
                              {"eps", AttrType::Number, true},
                              {"step", AttrType::Int, true},
                              {"weight_decay", AttrType::Number, false}});
        !e.empty())
      return e;
    if (auto e = check_input_count("adam", in, 4); !e.empty()) return e + " (p, g, m, v)";
    if (auto e = check_output_count("adam", n_out, 3); !e.empty()) return e + " (p', m', v')";
    if (auto e = check_state("adam", in); !e.empty()) return e;
    const int64_t step = attrs.at("step").as_int();
    if (step < 1 || step > 1000000)
      return "adam: step must be an integer in 1..1000000, found " + std::to_string(step);
    // The bias corrections divide by 1 - beta^step: it must not be 0.
    for (const char* beta : {"beta1", "beta2"})
      if (power(attrs.at(beta).number, step) == 1)
        return std::string("adam: ") + beta + " = " + attrs.at(beta).describe() + " makes 1 - " +
               beta + "^step zero at step " + std::to_string(step);
    out = {in[0], in[2], in[3]};
    return "";
  }
  template <class Alg>
  static Tensors<typename Alg::Value> eval(Alg& alg, const OpCall& call,
                                           const Tensors<typename Alg::Value>& in) {
    using V = typename Alg::Value;
    const AttrMap& at = call.attrs;
    const Rational b1 = at.at("beta1").number, b2 = at.at("beta2").number;
    const int64_t step = at.at("step").as_int();
    const Rational wd = attr_number(at, "weight_decay", 0);
    auto c = [&](const Rational& r) { return alg.constant(r, DClass::Real); };
    const V lr = c(at.at("lr").number), eps = c(at.at("eps").number);
    const V corr1 = c(1 - power(b1, step)), corr2 = c(1 - power(b2, step));
    std::vector<V> p_new, m_new, v_new;
    for (int64_t i = 0; i < in[0].size(); ++i) {
      const V &p = in[0].data[i], &g = in[1].data[i], &m = in[2].data[i], &v = in[3].data[i];
      V m2 = alg.add(alg.mul(c(b1), m), alg.mul(c(1 - b1), g));
      V v2 = alg.add(alg.mul(c(b2), v), alg.mul(alg.mul(c(1 - b2), g), g));
      V denom = alg.add(alg.call("sqrt", {alg.div(v2, corr2)}), eps);
      V update = alg.div(alg.div(m2, corr1), denom);
      // weight_decay * p is 0 when weight_decay is 0: leave the term out.
      if (wd != 0) update = alg.add(update, alg.mul(c(wd), p));
      p_new.push_back(alg.sub(p, alg.mul(lr, update)));
      m_new.push_back(m2);
      v_new.push_back(v2);
    }
    const Shape& s = in[0].shape;
    return {make_tensor(s, in[0].cls, std::move(p_new)),
            make_tensor(s, in[0].cls, std::move(m_new)),
            make_tensor(s, in[0].cls, std::move(v_new))};
  }
  static void relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out, AxisRelations& rel) {
    relate_identity(in, out, rel);
  }
};

}  // namespace

void register_optimizer_ops(OpRegistry& r) {
  add_op<Sgd>(r);
  add_op<Adam>(r);
}

}  // namespace shardproof::ops
