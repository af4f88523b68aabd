// Runs every op of a graph, in topological order, on any algebra: the values
// of its inputs in, every tensor's value out. `shardproof eval` (exact
// rationals) and claim inference (residues) share it.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/tensor.h"
#include "engine/ops/full_sizes.h"
#include "engine/ops/op_registry.h"

namespace shardproof {

// `env` holds a value for each input tensor index; every op's outputs are
// filled in (with `only`, those of the ops it accepts, by op index: they
// must read no tensor left out). Throws what the operators throw (EvalError
// outside the domain).
template <class Alg>
void run_graph(Alg& alg, const Graph& g,
               std::vector<std::optional<Tensor<typename Alg::Value>>>& env,
               const std::function<bool(int)>& only = {}) {
  const OpRegistry& registry = OpRegistry::instance();
  for (int index : g.topo_order) {
    if (only && !only(index)) continue;
    const Op& op = g.ops[static_cast<size_t>(index)];
    OpCall call;
    call.op = op.op;
    call.attrs = op.attrs;
    call.group = op.group;
    std::vector<Tensor<typename Alg::Value>> ins;
    ins.reserve(op.in.size());
    std::vector<Shape> full;
    for (int t : op.in) {
      ins.push_back(*env[static_cast<size_t>(t)]);
      full.push_back(g.tensors[static_cast<size_t>(t)].shape);
    }
    const OpDef* def = registry.find(op.op);
    call.full_in_shapes = declared_full_shapes(op.op, op.attrs, std::move(full));
    for (int t : op.out) {
      call.out_shapes.push_back(g.tensors[static_cast<size_t>(t)].shape);
      call.out_dtypes.push_back(g.tensors[static_cast<size_t>(t)].dtype);
    }
    auto outs = def->eval(alg, call, ins);
    for (size_t k = 0; k < op.out.size(); ++k)
      env[static_cast<size_t>(op.out[k])] = std::move(outs[k]);
  }
}

}  // namespace shardproof
