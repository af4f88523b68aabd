#include "engine/core/tensor.h"

namespace shardproof {

int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + index[i];
  return flat;
}

std::vector<int64_t> unflatten(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.size(), 0);
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 0) return index;
    index[i] = flat % shape[i];
    flat /= shape[i];
  }
  return index;
}

}  // namespace shardproof
