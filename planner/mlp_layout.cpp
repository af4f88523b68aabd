// Validation of an mlp configuration and the mesh index arithmetic.
#include <stdexcept>

#include "planner/mlp.h"

namespace shardproof::planner::mlp {

namespace {

// 0 (or empty) means "the model's default".
PlanConfig with_defaults(PlanConfig c) {
  if (c.layers == 0) c.layers = 2;
  if (c.hidden == 0) c.hidden = 8;
  if (c.batch == 0) c.batch = 8;
  if (c.optimizer.empty()) c.optimizer = "sgd";
  return c;
}

[[noreturn]] void reject(const std::string& why) {
  throw std::invalid_argument("mlp: " + why);
}

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

Layout::Layout(const PlanConfig& config)
    : c(with_defaults(config)),
      L(c.layers),
      dp(config.dp),
      tp(config.tp),
      pp(config.pp),
      mb(config.microbatches),
      B(c.batch),
      H(c.hidden) {
  for (auto [name, v] : {std::pair{"cp", config.cp},
                         {"ep", config.ep},
                         {"vpp", config.vpp},
                         {"zero", config.zero + 1}})
    if (v != 1) reject(std::string(name) + " is not supported by the mlp family");
  if (config.sp) reject("sp is not supported by the mlp family");
  if (config.etp != 0) reject("etp is not supported by the mlp family");
  if (config.seq != 0) reject("seq is not supported by the mlp family");
  if (config.tie_embeddings) reject("tie_embeddings is not supported by the mlp family");
  if (config.bias) reject("bias is not supported by the mlp family");
  if (config.reshard_residual) reject("reshard_residual is not supported by the mlp family");
  if (config.clip) reject("clip is not supported by the mlp family");
  if (config.dropout) reject("dropout is not supported by the mlp family");
  if (config.schedule) reject("schedule is not supported by the mlp family");
  if (L < 1) reject("layers must be >= 1 (got " + str(L) + ")");
  if (H < 1) reject("hidden must be >= 1 (got " + str(H) + ")");
  if (B < 1) reject("batch must be >= 1 (got " + str(B) + ")");
  for (auto [name, v] : {std::pair{"dp", dp}, {"tp", tp}, {"pp", pp}, {"microbatches", mb}})
    if (v < 1) reject(std::string(name) + " must be >= 1 (got " + str(v) + ")");
  if (H % tp != 0)
    reject("tp (" + str(tp) + ") must divide hidden (" + str(H) + ") so each rank gets whole " +
           "columns");
  if (B % (int64_t(dp) * mb) != 0)
    reject("dp * microbatches (" + str(dp) + " * " + str(mb) + ") must divide batch (" + str(B) +
           ")");
  if (pp > L) reject("pp (" + str(pp) + ") must be <= layers (" + str(L) + "): a stage per layer");
  if (c.optimizer != "sgd" && c.optimizer != "adam")
    reject("optimizer must be 'sgd' or 'adam' (got '" + c.optimizer + "')");
  // Written rank by rank, larger worlds make files no one can read; the
  // compact form does not grow with them (up to the format's 2^20 devices).
  if (!c.compact && int64_t(dp) * tp * pp > 4096)
    reject("dp * tp * pp must be <= 4096 (or use --compact, up to 2^20)");
  if (int64_t(dp) * tp * pp > (int64_t{1} << 20)) reject("dp * tp * pp must be <= 2^20");
}

LayerKind Layout::kind(int layer) const {
  if (layer % 2 == 1) return LayerKind::Row;
  return layer + 1 < L ? LayerKind::Column : LayerKind::ColumnGather;
}

Range Layout::local_cols(int layer, int t) const {
  return kind(layer) == LayerKind::Row ? all() : cols(t);
}

int Layout::stage_begin(int p) const {
  int base = L / pp, extra = L % pp;
  return p * base + (p < extra ? p : extra);
}

int Layout::stage_of(int layer) const {
  for (int p = 0; p < pp; ++p)
    if (layer < stage_end(p)) return p;
  return pp - 1;
}

std::string Layout::rank_prefix(int d, int t, int p) const {
  return "dp" + str(d) + ".tp" + str(t) + ".pp" + str(p);
}

std::string Layout::mb_prefix(int d, int t, int p, int m) const {
  return rank_prefix(d, t, p) + ".mb" + str(m);
}

}  // namespace shardproof::planner::mlp
