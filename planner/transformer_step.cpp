// One training step in the order a pipeline schedule runs it per (dp rank,
// micro-batch): embedding, layers stage by stage (activations sent across
// stage boundaries), LM head and loss, the backward in reverse (gradients
// sent back), the embedding backward; then the optimizer on every piece.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

void Builder::build() {
  if (s.moe()) return build_lockstep();
  declare_params();
  inputs();
  const Shape hs = {s.B, s.S, s.H};
  const Spec resid_spec = {Ax::Batch, Ax::SeqSp, Ax::Full};
  // Sends `name` from stage `from` to stage `to` on every (cp, tp) rank.
  auto send_all = [&](const Coord& x, int from, int to, const std::string& name) {
    each_cp_tp(x, [&](const Coord& xt) {
      Coord a = xt, b = xt;
      a.p = from;
      b.p = to;
      send(a, b, name, hs, resid_spec);
    });
  };
  for (const Ix& d : dp_ranks())
    for (const Ix& m : microbatches()) {
      Coord x{d, 0, 0, 0, m};
      embedding_forward(x);
      for (int i = 0; i < s.L; ++i) {
        x.p = s.stage_of(i);
        if (i > 0 && s.stage_of(i - 1) != x.p) send_all(x, s.stage_of(i - 1), x.p, resid(i));
        attention_forward(i, x);
        mlp_forward(i, x);
      }
      x.p = s.last_stage();
      head_forward_backward(x);
      for (int i = s.L - 1; i >= 0; --i) {
        x.p = s.stage_of(i);
        if (i + 1 < s.L && s.stage_of(i + 1) != x.p)
          send_all(x, s.stage_of(i + 1), x.p, grad(resid(i + 1)));
        mlp_backward(i, x);
        attention_backward(i, x);
      }
      x.p = 0;
      embedding_backward(x);
    }
  update_params();
}

}  // namespace shardproof::planner::transformer
