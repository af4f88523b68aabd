#include "engine/ops/full_sizes.h"

#include "engine/ops/op_helpers.h"

namespace shardproof {

std::vector<std::vector<bool>> full_dims_read(const std::string& op, const AttrMap& attrs,
                                              const std::vector<Shape>& full) {
  if (full.empty()) return {};
  if (op == "mean") {
    std::vector<bool> reduced;
    ops::reduced_dims(op, attrs, full[0], reduced);
    return {reduced};
  }
  if ((op == "layernorm" || op == "rmsnorm") && !full[0].empty()) {
    std::vector<bool> last(full[0].size(), false);
    last.back() = true;
    return {last};
  }
  return {};
}

std::vector<Shape> declared_full_shapes(const std::string& op, const AttrMap& attrs,
                                        std::vector<Shape> full) {
  const std::vector<std::vector<bool>> read = full_dims_read(op, attrs, full);
  for (size_t i = 0; i < full.size(); ++i)
    for (size_t d = 0; d < full[i].size(); ++d)
      if (i >= read.size() || d >= read[i].size() || !read[i][d]) full[i][d] = kUnreadFullSize;
  return full;
}

}  // namespace shardproof
