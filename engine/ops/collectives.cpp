#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

void register_collective_ops(OpRegistry&) {}

}  // namespace shardproof::ops
