#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

void register_optimizer_ops(OpRegistry&) {}

}  // namespace shardproof::ops
