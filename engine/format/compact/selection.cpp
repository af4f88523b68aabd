#include "engine/format/compact/selection.h"

namespace shardproof::compact {

Selection::Selection(const CompactGraph& g) {
  for (const Program& p : g.programs) {
    tensors.emplace_back(p.tensors.size());
    produced.emplace_back(p.tensors.size());
    ops.emplace_back(p.ops.size());
  }
}

size_t Selection::op_count() const {
  size_t n = 0;
  for (const auto& p : ops)
    for (const auto& s : p) n += s.size();
  return n;
}

}  // namespace shardproof::compact
