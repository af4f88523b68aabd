// `shardproof eval PLAN --graph logical|parallel --inputs VALUES.json [--real-functions]`:
// runs one graph of a plan in the engine's own concrete interpreter (the operator
// semantics that proofs use, on exact rationals) and prints its outputs as JSON. The
// PyTorch front end's fidelity tests compare this against torch's eager results, so the
// lowering is checked against the engine's semantics, not against a second copy of them.
//
// Uninterpreted functions (exp, gelu, map fns, ...) take fixed arbitrary polynomials by
// default, as in refutation testing; --real-functions gives the known names their real
// meaning, computed in double and converted to exact rationals.
//
// Self-contained on purpose: it needs only the plan parser, the IR and the operator
// registry of the engine.
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/format/plan_parser.h"
#include "engine/ops/graph_eval.h"

namespace shardproof::cli {
namespace {

struct EvalArgs {
  std::string plan;
  std::string graph = "logical";
  std::string inputs;
  bool real_functions = false;
  bool all_tensors = false;
  bool exact = false;
};
EvalArgs g_args;

struct EvalFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const double kSqrt2 = std::sqrt(2.0);
const double kPi = std::acos(-1.0);

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double gelu_tanh_inner(double x) {
  return std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x);
}

// The real meaning of every function name the engine leaves uninterpreted, and of the
// derivative names the PyTorch lowering writes as `map` functions.
double real_function(const std::string& fn, const std::vector<double>& a) {
  auto one = [&](const char* name) {
    if (a.size() != 1) throw EvalFailure(std::string(name) + " takes one argument");
    return a[0];
  };
  if (fn == "exp") return std::exp(one("exp"));
  if (fn == "log") return std::log(one("log"));
  if (fn == "sqrt") return std::sqrt(one("sqrt"));
  if (fn == "rsqrt") return 1.0 / std::sqrt(one("rsqrt"));
  if (fn == "tanh") return std::tanh(one("tanh"));
  if (fn == "sigmoid") return sigmoid(one("sigmoid"));
  if (fn == "erf") return std::erf(one("erf"));
  if (fn == "gelu") {
    double x = one("gelu");
    return 0.5 * x * (1.0 + std::erf(x / kSqrt2));
  }
  if (fn == "silu") {
    double x = one("silu");
    return x * sigmoid(x);
  }
  if (fn == "map:gelu_grad") {
    double x = one("gelu_grad");
    return 0.5 * (1.0 + std::erf(x / kSqrt2)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * kPi);
  }
  if (fn == "map:gelu_tanh_grad") {
    double x = one("gelu_tanh_grad");
    double t = std::tanh(gelu_tanh_inner(x));
    double dinner = std::sqrt(2.0 / kPi) * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * dinner;
  }
  if (fn == "map:cos") return std::cos(one("cos"));
  if (fn == "map:sin") return std::sin(one("sin"));
  if (fn == "map:pow") {
    if (a.size() != 2) throw EvalFailure("pow takes two arguments");
    return std::pow(a[0], a[1]);
  }
  if (fn == "map:silu_grad") {
    double x = one("silu_grad");
    double s = sigmoid(x);
    return s * (1.0 + x * (1.0 - s));
  }
  throw EvalFailure("--real-functions: no real meaning is known for function \"" + fn + "\"");
}

class RealFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    std::vector<double> a;
    for (const Rational& r : args) a.push_back(r.get_d());
    double v = real_function(fn, a);
    if (!std::isfinite(v)) throw EvalError(fn + " is undefined at these arguments");
    return Rational(v);  // exact value of the double
  }
};

Rational json_number(const nlohmann::json& v, const std::string& where) {
  if (v.is_boolean()) return Rational(v.get<bool>() ? 1 : 0);
  if (v.is_number_integer()) return Rational(std::to_string(v.get<int64_t>()));
  if (v.is_number()) return Rational(v.get<double>());
  if (v.is_string()) {
    if (auto r = parse_exact_number(v.get<std::string>())) return *r;
  }
  throw EvalFailure(where + ": expected a number, got " + v.dump());
}

void flatten(const nlohmann::json& v, std::vector<Rational>& out, const std::string& where) {
  if (v.is_array()) {
    for (const auto& x : v) flatten(x, out, where);
  } else {
    out.push_back(json_number(v, where));
  }
}

nlohmann::json nested(const Tensor<Rational>& t, size_t dim, int64_t& flat, bool exact) {
  if (dim == t.shape.size()) {
    const Rational& r = t.data[static_cast<size_t>(flat++)];
    if (exact) return rational_to_string(r);
    if (t.cls == DClass::Bool) return r != 0;
    if (t.cls == DClass::Int) return static_cast<int64_t>(r.get_d());
    return r.get_d();
  }
  nlohmann::json arr = nlohmann::json::array();
  for (int64_t i = 0; i < t.shape[dim]; ++i) arr.push_back(nested(t, dim + 1, flat, exact));
  return arr;
}

nlohmann::json to_json(const Tensor<Rational>& t, bool exact) {
  int64_t flat = 0;
  return nested(t, 0, flat, exact);
}

int run_eval() {
  const EvalArgs& args = g_args;
  ParseResult parsed = parse_plan_file(args.plan);
  if (!parsed.io_error.empty()) {
    std::cerr << "shardproof eval: " << parsed.io_error << "\n";
    return kExitInternal;
  }
  if (parsed.error) {
    std::cerr << parsed.error->to_string() << "\n";
    return kExitUsage;
  }
  const Graph& g = args.graph == "parallel" ? parsed.plan->parallel : parsed.plan->logical;
  if (args.graph == "parallel" && parsed.plan->compact) {
    std::cerr << "shardproof eval: compact plans too large to expand are not supported\n";
    return kExitUsage;
  }
  nlohmann::json values;
  {
    std::ifstream in(args.inputs);
    if (!in) {
      std::cerr << "shardproof eval: cannot read " << args.inputs << "\n";
      return kExitInternal;
    }
    try {
      values = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      std::cerr << "shardproof eval: " << args.inputs << ": not JSON: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  PseudoRandomFunctions arbitrary;
  RealFunctions real;
  ConcreteAlgebra alg(args.real_functions ? static_cast<FunctionTable&>(real)
                                          : static_cast<FunctionTable&>(arbitrary));
  std::vector<std::optional<Tensor<Rational>>> env(g.tensors.size());
  try {
    for (int t : g.inputs) {
      const TensorDecl& d = g.tensors[static_cast<size_t>(t)];
      if (!values.contains(d.name)) throw EvalFailure("no value for input \"" + d.name + "\"");
      Tensor<Rational> tensor;
      tensor.shape = d.shape;
      tensor.cls = dclass_of(d.dtype);
      flatten(values[d.name], tensor.data, d.name);
      if (tensor.size() != element_count(d.shape))
        throw EvalFailure("input \"" + d.name + "\" has " + std::to_string(tensor.size()) +
                          " values, its shape " + shape_to_string(d.shape) + " needs " +
                          std::to_string(element_count(d.shape)));
      for (Rational& r : tensor.data) r = alg.constant(r, tensor.cls);
      env[static_cast<size_t>(t)] = std::move(tensor);
    }
    run_graph(alg, g, env);
  } catch (const EvalFailure& e) {
    std::cerr << "shardproof eval: " << e.what() << "\n";
    return kExitUsage;
  } catch (const EvalError& e) {
    std::cerr << "shardproof eval: outside the plan's domain: " << e.what() << "\n";
    return kExitUsage;
  }
  nlohmann::json out = nlohmann::json::object();
  nlohmann::json outputs = nlohmann::json::object();
  for (int t : g.outputs)
    outputs[g.tensors[static_cast<size_t>(t)].name] =
        to_json(*env[static_cast<size_t>(t)], args.exact);
  out["outputs"] = outputs;
  if (args.all_tensors) {
    nlohmann::json all = nlohmann::json::object();
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (env[t]) all[g.tensors[t].name] = to_json(*env[t], args.exact);
    out["tensors"] = all;
  }
  std::cout << out.dump() << "\n";
  return kExitOk;
}

}  // namespace

CLI::App* add_eval_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Run one graph of a plan in the engine's concrete interpreter; print outputs "
      "as JSON");
  cmd->add_option("plan", g_args.plan, "plan file")->required();
  cmd->add_option("--graph", g_args.graph, "logical or parallel")
      ->check(CLI::IsMember({"logical", "parallel"}));
  cmd->add_option("--inputs", g_args.inputs,
                  "JSON object: input tensor name -> nested list of numbers (or \"p/q\")")
      ->required();
  cmd->add_flag("--real-functions", g_args.real_functions,
                "give exp, log, sqrt, rsqrt, tanh, sigmoid, erf, gelu, silu and the map "
                "functions gelu_grad, gelu_tanh_grad, silu_grad, cos, sin, pow their real meaning (in double)");
  cmd->add_flag("--all", g_args.all_tensors, "print every tensor, not only the outputs");
  cmd->add_flag("--exact", g_args.exact, "print exact rationals as strings");
  return cmd;
}

int run_eval_command() {
  return run_eval();
}

}  // namespace shardproof::cli
