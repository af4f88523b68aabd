// contraction_of (engine/core/contraction.h): knows which ops are sums over an
// index box, and along which operand dims.
#include "engine/core/contraction.h"

#include "engine/ops/op_helpers.h"

namespace shardproof {

std::string contraction_of(const std::string& op, const AttrMap& attrs,
                           const std::vector<Shape>& operand_shapes, Contraction& out) {
  out = Contraction{};
  if (op == "matmul" && operand_shapes.size() == 2 && operand_shapes[0].size() >= 2 &&
      operand_shapes[1].size() >= 2) {
    const int ra = static_cast<int>(operand_shapes[0].size());
    const int rb = static_cast<int>(operand_shapes[1].size());
    const int ak = ra - (ops::attr_bool(attrs, "transpose_a") ? 2 : 1);
    const int bk = rb - (ops::attr_bool(attrs, "transpose_b") ? 1 : 2);
    out.axes = {{{0, ak}, {1, bk}}};
    out.sizes = {operand_shapes[0][ak]};
    return "";
  }
  if (op == "sum" && operand_shapes.size() == 1) {
    std::vector<bool> reduced;
    if (std::string e = ops::reduced_dims(op, attrs, operand_shapes[0], reduced); !e.empty())
      return e;
    for (size_t d = 0; d < reduced.size(); ++d) {
      if (!reduced[d]) continue;
      out.axes.push_back({{0, static_cast<int>(d)}});
      out.sizes.push_back(operand_shapes[0][d]);
    }
    if (out.axes.empty()) return "sum reduces no dim";
    return "";
  }
  return op + " is not a contraction (only matmul and sum are)";
}

}  // namespace shardproof
