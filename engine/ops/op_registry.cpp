// Every built-in operator, registered by explicit calls: the engine is a
// static library, so static-initialiser registration would be dropped.
#include "engine/ops/op_registry.h"

#include "engine/ops/op_helpers.h"

namespace shardproof {

namespace ops {
void register_random_ops(OpRegistry& r);  // random.cpp
}

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    ops::register_elementwise_ops(r);
    ops::register_constant_ops(r);
    ops::register_shape_ops(r);
    ops::register_reduction_ops(r);
    ops::register_matmul_ops(r);
    ops::register_composite_ops(r);
    ops::register_indexing_ops(r);
    ops::register_optimizer_ops(r);
    ops::register_collective_ops(r);
    ops::register_random_ops(r);
    return r;
  }();
  return registry;
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : defs_) out.push_back(name);
  return out;
}

void OpRegistry::add(std::unique_ptr<OpDef> def) {
  std::string name = def->name();
  defs_[name] = std::move(def);
}

}  // namespace shardproof
