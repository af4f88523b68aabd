// Boxes (a [lo, hi) range per dim, the SliceSpec of lineage) as demanded
// regions and narrowed stages use them: one copy of the small helpers.
#pragma once

#include "engine/core/ir.h"

namespace shardproof {

// Every position of a tensor of `shape`.
inline SliceSpec whole_box(const Shape& shape) {
  SliceSpec box;
  for (int64_t n : shape) box.push_back({0, n});
  return box;
}

// Whether some dim of `box` holds no position.
inline bool empty_box(const SliceSpec& box) {
  for (auto [lo, hi] : box)
    if (lo >= hi) return true;
  return false;
}

// The shape of what `box` holds.
inline Shape box_sizes(const SliceSpec& box) {
  Shape s;
  for (auto [lo, hi] : box) s.push_back(hi - lo);
  return s;
}

}  // namespace shardproof
