#include "engine/ops/op_helpers.h"

namespace shardproof::ops {

void register_indexing_ops(OpRegistry&) {}

}  // namespace shardproof::ops
