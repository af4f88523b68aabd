#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

void register_composite_ops(OpRegistry&) {}

}  // namespace shardproof::ops
