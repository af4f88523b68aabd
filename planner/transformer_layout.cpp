// Validation of a transformer configuration against its model shape, and
// the pipeline's layer-to-stage map.
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

Layout::Layout(const ModelShape& shape, const PlanConfig& config) : model(shape), c(config) {
  auto reject = [&](const std::string& why) {
    throw std::invalid_argument(model.name + ": " + why);
  };
  if (c.layers == 0) c.layers = model.layers;
  if (c.batch == 0) c.batch = int(model.batch);
  if (c.seq == 0) c.seq = model.seq;
  if (c.optimizer.empty()) c.optimizer = "adam";
  if (c.hidden != 0 && c.hidden != model.hidden)
    reject("--hidden is fixed by the model (" + str(model.hidden) +
           "); pick another model instead");
  L = c.layers, dp = c.dp, tp = c.tp, pp = c.pp, cp = c.cp, mb = c.microbatches, zero = c.zero;
  vpp = c.vpp;
  sp = c.sp, tie = c.tie_embeddings;
  B = c.batch, S = c.seq, H = model.hidden, NH = model.heads, NKV = model.kv_heads;
  D = H / NH, F = model.ffn, V = model.vocab;

  if (L < 1) reject("layers must be >= 1 (got " + str(L) + ")");
  for (auto [name, v] : {std::pair{"dp", dp},
                         {"tp", tp},
                         {"pp", pp},
                         {"vpp", vpp},
                         {"cp", cp},
                         {"microbatches", mb}})
    if (v < 1) reject(std::string(name) + " must be >= 1 (got " + str(v) + ")");
  init_moe();
  if (zero < 0 || zero > 3) reject("zero must be 0, 1, 2 or 3 (got " + str(zero) + ")");
  if (zero > 0 && dp * cp < 2) reject("zero needs dp * cp >= 2 to shard anything");
  if (sp && tp < 2) reject("sp (sequence parallelism) needs tp >= 2");
  // The round trip cuts a tensor every tp rank holds whole: under sp each
  // rank holds another piece of the sequence.
  if (c.reshard_residual && (tp < 2 || sp))
    reject("reshard_residual needs tp >= 2 and no sp (the residual replicated over tp)");
  if (c.dropout && model.experts > 0) reject("dropout is not supported on MoE models yet");
  if (c.schedule && c.compact) reject("--compact does not support --schedule yet");
  if (c.schedule && pp < 2) reject("schedule needs pp >= 2");
  if (c.optimizer != "sgd" && c.optimizer != "adam")
    reject("optimizer must be 'sgd' or 'adam' (got '" + c.optimizer + "')");
  if (B % (int64_t(dp) * mb) != 0)
    reject("dp * microbatches (" + str(dp) + " * " + str(mb) + ") must divide the batch (" +
           str(B) + " sequences)");
  if (NH % tp != 0) reject("tp (" + str(tp) + ") must divide the heads (" + str(NH) + ")");
  if (tp > NKV ? tp % NKV != 0 : NKV % tp != 0)
    reject("tp (" + str(tp) + ") and the kv heads (" + str(NKV) +
           ") must divide one another so kv heads are split or replicated evenly");
  if (F % tp != 0) reject("tp (" + str(tp) + ") must divide the ffn size (" + str(F) + ")");
  if (V % tp != 0) reject("tp (" + str(tp) + ") must divide the vocabulary (" + str(V) + ")");
  if (D % 2 != 0) reject("head dim (" + str(D) + ") must be even for rotary embedding");
  const int64_t seq_pieces = int64_t(cp) * (sp ? tp : 1);
  if (S % seq_pieces != 0)
    reject("cp" + std::string(sp ? " * tp" : "") + " (" + str(seq_pieces) +
           ") must divide the sequence length (" + str(S) + ")");
  if (pp > L) reject("pp (" + str(pp) + ") must be <= layers (" + str(L) + ")");
  if (vpp > 1 && pp < 2) reject("vpp (interleaved pipeline) needs pp >= 2");
  if (int64_t(pp) * vpp > L)
    reject("pp * vpp (" + str(int64_t(pp) * vpp) + ") must be <= layers (" + str(L) + ")");
  // Megatron's interleaved order takes the micro-batches pp at a time.
  if (c.schedule && vpp > 1 && mb % pp != 0)
    reject("--schedule with vpp needs microbatches divisible by pp (got " + str(mb) + ", pp " +
           str(pp) + ")");
  if (tie && V % tp != 0) reject("tp must divide the vocabulary");
  // The compact form is not written rank by rank: its bound is the mesh's.
  const int64_t max_world = c.compact ? int64_t(1) << 20 : 4096;
  if (int64_t(dp) * cp * tp * pp > max_world)
    reject("dp * cp * tp * pp must be <= " + str(max_world) + (c.compact ? "" : " (or --compact)"));
}

Layout Layout::single_device() const {
  PlanConfig one = c;
  one.dp = one.tp = one.pp = one.vpp = one.cp = one.microbatches = one.ep = 1;
  one.etp = 0;
  one.zero = 0;
  one.sp = false;
  one.reshard_residual = false;  // a parallel round trip, not part of the model
  one.schedule = false;          // the parallel graph's send order
  one.bug.clear();
  Layout l(model, one);
  l.logical = true;
  return l;
}

int Layout::stage_begin(int k) const {
  const int chunks = pp * vpp;
  int base = L / chunks, extra = L % chunks;
  return k * base + (k < extra ? k : extra);
}

int Layout::chunk_of(int layer) const {
  for (int k = 0; k < pp * vpp; ++k)
    if (layer < stage_end(k)) return k;
  return pp * vpp - 1;
}

}  // namespace shardproof::planner::transformer
