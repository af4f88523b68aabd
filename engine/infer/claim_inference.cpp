#include "engine/infer/claim_inference.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include <xxhash.h>

#include "engine/core/tensor.h"
#include "engine/infer/claim_choice.h"
#include "engine/infer/plan_values.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage_eval.h"

namespace shardproof::infer {
namespace {

using Alg = ModularAlgebra;

// Where a block of a logical tensor sits, and its first nonzero value.
struct BlockRef {
  int logical;
  std::vector<int64_t> block;  // block coordinate per dim
  uint64_t first;
};

// Values divided by their first nonzero one, hashed: equal for tensors that
// are multiples of each other. `first` is 0 for an all-zero tensor.
uint64_t scaled_fingerprint(const std::vector<uint64_t>& values, uint64_t& first) {
  first = 0;
  for (uint64_t x : values)
    if (x != 0) {
      first = x;
      break;
    }
  if (first == 0) return 0;
  const Alg alg;
  const uint64_t inv = Alg::inverse(first);
  std::vector<uint64_t> normal(values.size());
  for (size_t i = 0; i < values.size(); ++i) normal[i] = alg.mul(values[i], inv);
  return XXH3_64bits(normal.data(), normal.size() * sizeof(uint64_t));
}

bool all_equal(const std::vector<uint64_t>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
}

// Values that are all small rationals (masks, one-hots, positions, counts)
// come from a few possibilities, so their blocks match other blocks by
// coincidence: a data-parallel rank's [4, 1] mask column "equals" some
// other column. Every such proposal fails its proof and is withdrawn with
// its family, which takes the real claims of that family with it.
bool all_small(const std::vector<uint64_t>& values) {
  int64_t num = 0, den = 0;
  return std::all_of(values.begin(), values.end(),
                     [&](uint64_t v) { return Alg::small_rational(v, num, den); });
}

// The block at grid coordinate `block` of blocks shaped `shape`.
SliceSpec block_slice(const Shape& shape, const std::vector<int64_t>& block) {
  SliceSpec slice;
  for (size_t d = 0; d < shape.size(); ++d)
    slice.emplace_back(block[d] * shape[d], (block[d] + 1) * shape[d]);
  return slice;
}

std::vector<uint64_t> block_values(const Residues& whole, const Shape& shape,
                                   const std::vector<int64_t>& block) {
  return slice_of(whole, block_slice(shape, block)).data;
}

bool divides(const Shape& part, const Shape& whole) {
  if (part.size() != whole.size()) return false;
  for (size_t d = 0; d < part.size(); ++d)
    if (part[d] <= 0 || whole[d] % part[d] != 0) return false;
  return true;
}

// Evaluates with the largest bound on integer inputs that keeps every index
// in range: ids spread over many rows make the values tell tensors apart.
std::optional<PlanValues> evaluate(const Plan& plan, uint64_t seed) {
  std::set<int64_t, std::greater<>> bounds = {1};
  for (const TensorDecl& d : plan.logical.tensors)
    for (int64_t n : d.shape) bounds.insert(std::max<int64_t>(n, 1));
  for (int64_t bound : bounds) {
    try {
      return evaluate_plan(plan, seed, bound);
    } catch (const EvalError&) {
    }
  }
  return std::nullopt;
}

int64_t graph_elements(const Graph& g) {
  int64_t n = 0;
  for (const TensorDecl& d : g.tensors) n += element_count(d.shape);
  return n;
}

using BlockIndex = std::unordered_multimap<uint64_t, BlockRef>;

// Every block shaped `shape` of every logical real tensor, by the
// fingerprint of its values up to a factor; nullopt past `budget` elements.
std::optional<BlockIndex> index_blocks(const Plan& plan, const PlanValues& values,
                                       const Shape& shape, int64_t& budget) {
  BlockIndex index;
  for (size_t l = 0; l < plan.logical.tensors.size(); ++l) {
    const TensorDecl& ld = plan.logical.tensors[l];
    const std::optional<Residues>& lv = values.logical[l];
    if (!lv || dclass_of(ld.dtype) != DClass::Real || !divides(shape, ld.shape)) continue;
    budget -= element_count(ld.shape);
    if (budget < 0) return std::nullopt;
    Shape grid;
    for (size_t d = 0; d < shape.size(); ++d) grid.push_back(ld.shape[d] / shape[d]);
    for (int64_t b = 0; b < element_count(grid); ++b) {
      std::vector<int64_t> block = unflatten(grid, b);
      uint64_t first = 0;
      const uint64_t key = scaled_fingerprint(block_values(*lv, shape, block), first);
      if (first != 0) index.emplace(key, BlockRef{static_cast<int>(l), block, first});
    }
  }
  return index;
}

// The claims parallel tensor `t` could make: every indexed block whose
// values are a small rational times its own, compared element by element.
std::vector<InferredClaim> matches(const Plan& plan, const PlanValues& values,
                                   const BlockIndex& index, const Shape& shape, int t) {
  std::vector<InferredClaim> found;
  const TensorDecl& pd = plan.parallel.tensors[static_cast<size_t>(t)];
  const std::vector<uint64_t>& pv = values.parallel[static_cast<size_t>(t)]->data;
  uint64_t first = 0;
  const uint64_t key = scaled_fingerprint(pv, first);
  if (first == 0) return found;
  const Alg alg;
  auto [lo, hi] = index.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    const BlockRef& ref = it->second;
    const TensorDecl& ld = plan.logical.tensors[static_cast<size_t>(ref.logical)];
    if (ld.dtype != pd.dtype) continue;
    int64_t num = 0, den = 1;
    const uint64_t ratio = alg.div(first, ref.first);
    if (!Alg::small_rational(ratio, num, den)) continue;
    // Guard against a fingerprint collision: compare every element.
    const std::vector<uint64_t> lv =
        block_values(*values.logical[static_cast<size_t>(ref.logical)], shape, ref.block);
    bool equal = true;
    for (size_t i = 0; i < lv.size() && equal; ++i) equal = alg.mul(ratio, lv[i]) == pv[i];
    if (!equal) continue;
    InferredClaim claim;
    claim.parallel = t;
    claim.of.tensor = ld.name;
    claim.of.logical = ref.logical;
    claim.of.slice = block_slice(shape, ref.block);
    claim.of.scale_num = num;
    claim.of.scale_den = den;
    found.push_back(std::move(claim));
  }
  // A tensor equal to two blocks of one logical tensor (a broadcast:
  // `param.expand_as(h)` on a data-parallel rank equals every row block) does
  // not say which block is its own; a guess names another rank's block, its
  // stage cannot prove it, and withdrawing the family drops every claim on
  // that tensor. Such a tensor stays inside its consumers' stages instead.
  std::map<int, int> blocks_of;
  for (const InferredClaim& c : found) ++blocks_of[c.of.logical];
  std::erase_if(found, [&](const InferredClaim& c) { return blocks_of[c.of.logical] > 1; });
  return found;
}

}  // namespace

InferenceResult infer_claims(const Plan& plan, const InferenceLimits& limits) {
  InferenceResult result;
  if (plan.compact) {
    result.skipped = "a compact plan verified per class";
    return result;
  }
  const int64_t elements = graph_elements(plan.logical) + graph_elements(plan.parallel);
  if (elements > limits.max_elements) {
    result.skipped = "the plan holds " + std::to_string(elements) + " elements (limit " +
                     std::to_string(limits.max_elements) + ")";
    return result;
  }
  std::optional<PlanValues> values = evaluate(plan, limits.seed);
  if (!values) {
    result.skipped = "no random values inside the plan's domain";
    return result;
  }

  // Candidates: unclaimed real intermediates with informative values.
  std::map<Shape, std::vector<int>> by_shape;
  for (size_t t = 0; t < plan.parallel.tensors.size(); ++t) {
    const TensorDecl& d = plan.parallel.tensors[t];
    const std::optional<Residues>& v = values->parallel[t];
    if (d.of || plan.parallel.producer[t] < 0 || !v || dclass_of(d.dtype) != DClass::Real) continue;
    if (all_equal(v->data) || all_small(v->data)) continue;  // say nothing, or too little
    by_shape[d.shape].push_back(static_cast<int>(t));
  }

  // Every matching block of every candidate tensor; choose_claims picks one.
  std::vector<std::vector<InferredClaim>> candidates(plan.parallel.tensors.size());
  int64_t budget = limits.max_elements;
  for (const auto& [shape, members] : by_shape) {
    std::optional<BlockIndex> index = index_blocks(plan, *values, shape, budget);
    if (!index) {
      result.skipped = "matching would exceed the element budget";
      return result;
    }
    for (int t : members)
      candidates[static_cast<size_t>(t)] = matches(plan, *values, *index, shape, t);
  }
  result.claims = choose_claims(plan, std::move(candidates));
  return result;
}

Plan with_claims(const Plan& plan, const std::vector<InferredClaim>& claims) {
  Plan out = plan;
  for (const InferredClaim& c : claims)
    out.parallel.tensors[static_cast<size_t>(c.parallel)].of = c.of;
  return out;
}

}  // namespace shardproof::infer
