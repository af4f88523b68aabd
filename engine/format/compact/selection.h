// The instances of a compact plan that the class verifier chose to write
// out (classes/compact_explore.h fills it, compact_expand.h writes it).
#pragma once

#include <cstdint>
#include <unordered_set>
#include <vector>

#include "engine/format/compact/compact_graph.h"

namespace shardproof::compact {

// Instances chosen for writing, per template: packed coordinates
// (Mesh-independent key: rank * mb_count + mb).
struct Selection {
  // [program][element]
  std::vector<std::vector<std::unordered_set<int64_t>>> tensors, ops;
  // Tensor instances the selection must treat as given (a stage's claimed
  // inputs whose producers it does not hold).
  std::vector<std::vector<std::unordered_set<int64_t>>> produced;
  explicit Selection(const CompactGraph& g);
  size_t op_count() const;
};

}  // namespace shardproof::compact
