// Validation of the MoE part of a transformer configuration: expert
// parallelism, expert tensor parallelism, context parallelism's slot
// blocks, and the degrees MoE layers do not support.
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

void Layout::init_moe() {
  auto reject = [&](const std::string& why) {
    throw std::invalid_argument(model.name + ": " + why);
  };
  ep = c.ep;
  E = model.experts, C = model.capacity, FE = model.expert_ffn, FS = model.shared_ffn;
  first_dense = model.first_dense;
  if (!moe()) {
    if (ep != 1) reject("ep applies to MoE models only");
    return;
  }
  if (ep < 1) reject("ep must be >= 1 (got " + str(ep) + ")");
  // Expert parallelism re-factors the dp ranks: ep groups of ep consecutive
  // dp ranks each own every expert block once, edp = dp / ep replicas.
  if (dp % ep != 0) reject("ep must divide dp (got ep " + str(ep) + ", dp " + str(dp) + ")");
  if (E % ep != 0) reject("ep (" + str(ep) + ") must divide the experts (" + str(E) + ")");
  if (FE % tp != 0)
    reject("tp (" + str(tp) + ") must divide the expert ffn size (" + str(FE) + ")");
  if (FS % tp != 0)
    reject("tp (" + str(tp) + ") must divide the shared expert ffn size (" + str(FS) + ")");
  // Routing groups are whole sequences: under sp and cp the tokens are
  // gathered into them (moe_seq.cpp), and each cp rank contracts its own
  // block of the slots for the expert weight gradients.
  if (C % cp != 0)
    reject("cp (" + str(cp) + ") must divide the expert capacity (" + str(C) + " slots)");
  // ZeRO shards a block replicated over an edp group there (transformer_update.cpp), but
  // under cp that block's gradient is a sum over edp x cp: not written yet.
  if (zero > 0 && cp > 1 && ep > 1 && ep < dp)
    reject("ZeRO with cp > 1 and 1 < ep < dp is not supported for MoE models yet");
}

}  // namespace shardproof::planner::transformer
