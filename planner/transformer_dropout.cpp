// Hidden dropout on each dense layer's MLP output (--dropout), as Megatron
// applies it before the residual add: `l{i}.mlp.mask = random(rng.state)`
// over [batch, seq, hidden], `l{i}.mlp.drop = l{i}.mlp * l{i}.mlp.mask`, and
// in the backward `grad.l{i}.mlp = grad.x{i+1} * l{i}.mlp.mask`. The mask is
// an uninterpreted function of the generator state and each element's
// position (the `random` op), so a rank's mask equals the logical one only
// if it draws with the same state at the positions of its own slice: ranks
// that hold the same (replicated) activation must draw the same mask, ranks
// that hold different pieces (sequence parallelism) different ones.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kResid = {Ax::Batch, Ax::SeqSp, Ax::Full};

}  // namespace

std::string Builder::rng_state(const Coord& x) {
  const std::string name = s.logical ? "rng.state" : at_rank(x, "rng.state");
  if (!g.has_tensor(name)) {
    claim(x, name, "rng.state", {}, {});
    add_input(name);
  }
  return name;
}

std::string Builder::dropout(const Coord& x, int i) {
  const std::string l = layer(i);
  if (!s.c.dropout) return at(x, l + ".mlp");
  const Shape hs = {s.B, s.S, s.H};
  std::string state = rng_state(x);
  // Bug: a replicated activation drawn with a per-tp-rank generator (the
  // tensor-parallel RNG tracker's state) instead of the shared one.
  if (fires("dropout-rng-replicated-differs", i, x) && int(x.t) != 0) {
    const std::string seed = scratch(x, l + ".rng.tp_offset", {});
    op(x, l + ".rng.tp_offset.const", "const", {}, {seed},
       {{"value", int(x.t)}, {"shape", nlohmann::json::array()}, {"dtype", "f32"}});
    const std::string forked = scratch(x, l + ".rng.forked", {});
    op(x, l + ".rng.fork", "add", {state, seed}, {forked});
    state = forked;
  }
  // Bug: sequence-parallel pieces drawn at tp rank 0's positions (one mask
  // for every piece).
  Coord at_positions = x;
  if (fires("dropout-rng-sharded-same", i, x)) at_positions.t = 0;
  const SymSlice slice = slice_of(x, hs, kResid);
  nlohmann::json offset = nlohmann::json::array();
  for (const SymRange& r : slice_of(at_positions, hs, kResid)) offset.push_back(r.first.attr());
  std::string mask = act(x, l + ".mlp.mask", hs, kResid);
  op(x, l + ".mlp.mask", "random", {state}, {mask},
     {{"shape", extent(slice)}, {"full", hs}, {"offset", offset}});
  std::string drop = act(x, l + ".mlp.drop", hs, kResid);
  op(x, l + ".mlp.drop", "mul", {at(x, l + ".mlp"), mask}, {drop});
  return drop;
}

}  // namespace shardproof::planner::transformer
