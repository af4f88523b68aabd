// The single-device training step of the mlp: forward, mean-squared-error
// loss, explicit backward, optimizer step. It depends only on the model
// (layers, hidden, batch, optimizer), never on the parallel degrees, so one
// logical graph serves every parallel plan of the same model.
#include "planner/mlp.h"

namespace shardproof::planner::mlp {

void build_logical(const Layout& s, GraphBuilder& g) {
  const Shape act_shape = {s.B, s.H}, w_shape = {s.H, s.H};
  g.tensor("x", act_shape);
  g.tensor("y", act_shape);
  g.input("x");
  g.input("y");
  for (int i = 0; i < s.L; ++i) {
    g.tensor(weight(i), w_shape);
    g.input(weight(i));
    if (s.adam()) {
      for (const std::string& st : {adam_m(i), adam_v(i)}) {
        g.tensor(st, w_shape);
        g.input(st);
      }
    }
  }

  // Forward: pre_i = in_i @ w_i; gelu between layers (not after the last).
  for (int i = 0; i < s.L; ++i) {
    std::string l = "l" + std::to_string(i);
    g.tensor(pre(i), act_shape);
    g.op(l + ".fwd.matmul", "matmul", {layer_input(i), weight(i)}, {pre(i)});
    if (i + 1 < s.L) {
      g.tensor(act(i), act_shape);
      g.op(l + ".fwd.gelu", "gelu", {pre(i)}, {act(i)});
    }
  }

  // loss = mean((out - y)^2) over all B*H elements.
  const std::string out = pre(s.L - 1);
  g.tensor("loss.diff", act_shape);
  g.tensor("loss.sq", act_shape);
  g.tensor("loss", {});
  g.op("loss.sub", "sub", {out, "y"}, {"loss.diff"});
  g.op("loss.square", "square", {"loss.diff"}, {"loss.sq"});
  g.op("loss.mean", "mean", {"loss.sq"}, {"loss"});

  // Backward. d loss / d out = 2 (out - y) / (B*H).
  g.tensor(grad(out), act_shape);
  g.op("loss.bwd.scale", "scale", {"loss.diff"}, {grad(out)}, {{"factor", fraction(2, s.B * s.H)}});
  for (int i = s.L - 1; i >= 0; --i) {
    std::string l = "l" + std::to_string(i);
    g.tensor(grad(weight(i)), w_shape);
    g.op(l + ".bwd.wgrad", "matmul", {layer_input(i), grad(pre(i))}, {grad(weight(i))},
         {{"transpose_a", true}});
    if (i == 0) continue;  // no gradient for the data
    std::string lp = "l" + std::to_string(i - 1);
    g.tensor(grad(act(i - 1)), act_shape);
    g.op(l + ".bwd.dgrad", "matmul", {grad(pre(i)), weight(i)}, {grad(act(i - 1))},
         {{"transpose_b", true}});
    g.tensor(dgelu(i - 1), act_shape);
    g.op(lp + ".bwd.dgelu", "map", {pre(i - 1)}, {dgelu(i - 1)}, {{"fn", "gelu'"}});
    g.tensor(grad(pre(i - 1)), act_shape);
    g.op(lp + ".bwd.mul", "mul", {grad(act(i - 1)), dgelu(i - 1)}, {grad(pre(i - 1))});
  }

  // Optimizer step on every weight.
  g.output("loss");
  for (int i = 0; i < s.L; ++i) {
    std::string w = weight(i);
    g.tensor(next(w), w_shape);
    if (!s.adam()) {
      g.op(w + ".sgd", "sgd", {w, grad(w)}, {next(w)}, optimizer_attrs(s));
      g.output(next(w));
      continue;
    }
    g.tensor(next(adam_m(i)), w_shape);
    g.tensor(next(adam_v(i)), w_shape);
    g.op(w + ".adam", "adam", {w, grad(w), adam_m(i), adam_v(i)},
         {next(w), next(adam_m(i)), next(adam_v(i))}, optimizer_attrs(s));
    for (const std::string& t : {next(w), next(adam_m(i)), next(adam_v(i))}) g.output(t);
  }
}

nlohmann::json optimizer_attrs(const Layout& s) {
  if (!s.adam()) return {{"lr", "1/100"}};
  return {{"lr", "1/1000"},
          {"beta1", "9/10"},
          {"beta2", "999/1000"},
          {"eps", "1/100000000"},
          {"step", 1}};
}

}  // namespace shardproof::planner::mlp
