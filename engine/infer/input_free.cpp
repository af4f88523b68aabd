#include "engine/infer/input_free.h"

#include <map>
#include <optional>

#include "engine/core/tensor.h"
#include "engine/infer/block_match.h"
#include "engine/ops/graph_eval.h"
#include "engine/ops/modular_algebra.h"

namespace shardproof::infer {
namespace {

using Residues = Tensor<uint64_t>;

// The values of `g`'s input-free tensors of at most `max_elements` elements
// made only from such tensors; the others stay empty. Nullopt when one
// leaves the domain (a division by zero).
std::optional<std::vector<std::optional<Residues>>> input_free_values(const Graph& g,
                                                                      const std::vector<char>& free,
                                                                      int64_t max_elements) {
  std::vector<char> evaluable(g.tensors.size(), 0);
  std::vector<char> run(g.ops.size(), 0);
  for (int o : g.topo_order) {
    const Op& op = g.ops[static_cast<size_t>(o)];
    bool ok = true;
    for (int t : op.in) ok = ok && evaluable[static_cast<size_t>(t)];
    for (int t : op.out)
      ok = ok && free[static_cast<size_t>(t)] &&
           element_count(g.tensors[static_cast<size_t>(t)].shape) <= max_elements;
    run[static_cast<size_t>(o)] = ok;
    for (int t : op.out) evaluable[static_cast<size_t>(t)] = ok;
  }
  std::vector<std::optional<Residues>> values(g.tensors.size());
  // Both graphs with the same seed: an uninterpreted function (exp of a
  // position) is the same fixed function in both.
  ModularAlgebra alg(/*function_seed=*/0);
  try {
    run_graph(alg, g, values, [&](int o) { return run[static_cast<size_t>(o)] != 0; });
  } catch (const EvalError&) {
    return std::nullopt;
  }
  return values;
}

}  // namespace

std::vector<char> input_free_tensors(const Graph& g) {
  std::vector<char> free(g.tensors.size(), 0);
  for (int o : g.topo_order) {
    const Op& op = g.ops[static_cast<size_t>(o)];
    bool all = true;
    for (int t : op.in) all = all && free[static_cast<size_t>(t)];
    for (int t : op.out) free[static_cast<size_t>(t)] = all;
  }
  return free;
}

std::vector<std::vector<InferredClaim>> input_free_candidates(const Plan& plan,
                                                              int64_t max_tensor_elements,
                                                              int64_t index_budget) {
  std::vector<std::vector<InferredClaim>> candidates(plan.parallel.tensors.size());
  const std::vector<char> parallel_free = input_free_tensors(plan.parallel);
  std::vector<int> wanted;
  for (size_t t = 0; t < plan.parallel.tensors.size(); ++t)
    if (parallel_free[t] && !plan.parallel.tensors[t].of && plan.parallel.producer[t] >= 0)
      wanted.push_back(static_cast<int>(t));
  if (wanted.empty()) return candidates;
  const auto logical_values =
      input_free_values(plan.logical, input_free_tensors(plan.logical), max_tensor_elements);
  const auto parallel_values = input_free_values(plan.parallel, parallel_free, max_tensor_elements);
  if (!logical_values || !parallel_values) return candidates;

  std::vector<Valued> logical;
  for (size_t l = 0; l < plan.logical.tensors.size(); ++l)
    if ((*logical_values)[l])
      logical.push_back(Valued{static_cast<int>(l), plan.logical.tensors[l].dtype,
                               &*(*logical_values)[l], /*input_free=*/true});
  std::map<Shape, std::vector<Valued>> by_shape;
  for (int t : wanted) {
    const std::optional<Residues>& v = (*parallel_values)[static_cast<size_t>(t)];
    const Valued pv{t, plan.parallel.tensors[static_cast<size_t>(t)].dtype, v ? &*v : nullptr,
                    /*input_free=*/true};
    if (v && worth_matching(pv)) by_shape[v->shape].push_back(pv);
  }
  int64_t budget = index_budget;
  for (const auto& [shape, members] : by_shape) {
    std::optional<BlockIndex> index =
        BlockIndex::build(logical, shape, /*input_free=*/true, budget);
    if (!index) break;
    for (const Valued& pv : members) {
      for (const BlockMatch& m : index->matches(pv)) {
        const TensorDecl& ld = plan.logical.tensors[static_cast<size_t>(m.logical)];
        InferredClaim claim;
        claim.parallel = pv.index;
        claim.of.tensor = ld.name;
        claim.of.logical = m.logical;
        claim.of.slice = block_slice(shape, m.block);
        candidates[static_cast<size_t>(pv.index)].push_back(std::move(claim));
      }
    }
  }
  return candidates;
}

}  // namespace shardproof::infer
