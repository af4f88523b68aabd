#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

void register_matmul_ops(OpRegistry&) {}

}  // namespace shardproof::ops
