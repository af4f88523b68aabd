// The training step of an MoE model. It is the dense step (transformer_step.cpp)
// with the loops turned inside out: micro-batch outermost, and every layer run
// for all dp ranks before the next one, because an MoE layer's all_to_all over
// the dp group needs every rank's dispatched tokens of that micro-batch
// (the graph builder wants each tensor declared before an op reads it).
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

void Builder::build_lockstep() {
  declare_params();
  inputs();
  moe_inputs();
  const Shape hs = {s.B, s.S, s.H};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  // Sends `name` from stage `from` to stage `to` on every cp and tp rank.
  auto send_all = [&](const Coord& x, int from, int to, const std::string& name) {
    each_cp_tp(x, [&](const Coord& xt) {
      Coord a = xt, b = xt;
      a.p = from;
      b.p = to;
      send(a, b, name, hs, resid_spec);
    });
  };
  // Runs `f` on every dp rank of micro-batch m, stage p.
  auto each_dp_at = [&](const Ix& m, int p, const std::function<void(const Coord&)>& f) {
    each_dp(Coord{0, 0, 0, p, m}, f);
  };
  for (const Ix& m : microbatches()) {
    each_dp_at(m, 0, [&](const Coord& x) { embedding_forward(x); });
    for (int i = 0; i < s.L; ++i) {
      const int p = s.stage_of(i);
      each_dp_at(m, p, [&](const Coord& x) {
        if (i > 0 && s.stage_of(i - 1) != p) send_all(x, s.stage_of(i - 1), p, resid(i));
        attention_forward(i, x);
        if (!s.moe_layer(i)) mlp_forward(i, x);
      });
      if (s.moe_layer(i)) moe_forward(i, Coord{0, 0, 0, p, m});
    }
    each_dp_at(m, s.last_stage(), [&](const Coord& x) { head_forward_backward(x); });
    for (int i = s.L - 1; i >= 0; --i) {
      const int p = s.stage_of(i);
      each_dp_at(m, p, [&](const Coord& x) {
        if (i + 1 < s.L && s.stage_of(i + 1) != p)
          send_all(x, s.stage_of(i + 1), p, grad(resid(i + 1)));
        if (!s.moe_layer(i)) mlp_backward(i, x);
      });
      if (s.moe_layer(i)) moe_backward(i, Coord{0, 0, 0, p, m});
      each_dp_at(m, p, [&](const Coord& x) { attention_backward(i, x); });
    }
    each_dp_at(m, 0, [&](const Coord& x) { embedding_backward(x); });
  }
  update_params();
}

}  // namespace shardproof::planner::transformer
