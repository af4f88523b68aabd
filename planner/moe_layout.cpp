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
  etp = c.etp == 0 ? tp : c.etp;
  if (!moe()) {
    if (ep != 1) reject("ep applies to MoE models only");
    if (c.etp != 0) reject("--etp applies to MoE models only");
    return;
  }
  if (ep < 1) reject("ep must be >= 1 (got " + str(ep) + ")");
  if (etp < 1 || tp % etp != 0) reject("--etp (" + str(etp) + ") must divide tp (" + str(tp) + ")");
  if (etp_split()) {
    check_etp_split();
  } else {
    // Expert parallelism re-factors the dp ranks: ep groups of ep consecutive
    // dp ranks each own every expert block once, edp = dp / ep replicas.
    if (dp % ep != 0) reject("ep must divide dp (got ep " + str(ep) + ", dp " + str(dp) + ")");
  }
  if (E % ep != 0) reject("ep (" + str(ep) + ") must divide the experts (" + str(E) + ")");
  if (FE % etp != 0)
    reject((etp_split() ? "--etp (" : "tp (") + str(etp) + ") must divide the expert ffn size (" +
           str(FE) + ")");
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

// Megatron's expert mesh with etp < tp: ep x etp x edp re-factors tp x dp.
// Each tp rank sends its token split (a block of its dp rank's sequences)
// to the experts (moe_etp.cpp). What is written and verified so far is the
// v1 plan with dp, tp, sp and cp (every tp and cp rank routes whole
// sequences, as at etp = tp; an ep group per cp rank), pp (and vpp),
// micro-batches, ZeRO (an expert block sharded over its edp group) and
// --clip; not ZeRO with cp (compact_unsupported refuses the compact form).
void Layout::check_etp_split() const {
  auto reject = [&](const std::string& why) {
    throw std::invalid_argument(model.name + ": --etp " + str(etp) + " below tp " + str(tp) + ": " +
                                why);
  };
  const int64_t q = int64_t(dp) * etp_splits();
  if (q % ep != 0) reject("ep (" + str(ep) + ") must divide dp * tp / etp (" + str(q) + ")");
  if (B % (int64_t(dp) * mb) == 0 && (B / (int64_t(dp) * mb)) % etp_splits() != 0)
    reject("tp / etp (" + str(etp_splits()) + ") must divide the sequences per dp rank and " +
           "micro-batch (" + str(B / (int64_t(dp) * mb)) + "): each tp rank sends one block of " +
           "them to the experts (raise --batch)");
  // ZeRO shards an expert block over its edp group; under cp its gradient
  // is a sum over edp x cp (not written, as at etp = tp).
  if (zero > 0 && cp > 1) reject("--zero with --cp is not supported yet");
}

}  // namespace shardproof::planner::transformer
