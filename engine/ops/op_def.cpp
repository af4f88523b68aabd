#include "engine/ops/op_def.h"

namespace shardproof {

// Conservative default: an operator that says nothing keeps every axis at
// full size, which is always sound.
void OpDef::relate_axes(const AttrMap&, const std::vector<TensorInfo>& in,
                        const std::vector<TensorInfo>& out, AxisRelations& rel) const {
  const int n_in = static_cast<int>(in.size());
  for (int i = 0; i < n_in; ++i)
    for (int d = 0; d < static_cast<int>(in[i].shape.size()); ++d) rel.freeze({i, d});
  for (int o = 0; o < static_cast<int>(out.size()); ++o)
    for (int d = 0; d < static_cast<int>(out[o].shape.size()); ++d) rel.freeze({n_in + o, d});
}

AttrMap OpDef::reduce_attrs(const AttrMap& attrs, const std::vector<Shape>&,
                            const std::vector<Shape>&, const PositionMap&) const {
  return attrs;
}

}  // namespace shardproof
