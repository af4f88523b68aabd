#include "engine/infer/reduced_inference.h"

#include <algorithm>
#include <map>

#include <xxhash.h>

#include "engine/core/tensor.h"
#include "engine/infer/block_match.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_eval.h"

namespace shardproof::infer {
namespace {

using Alg = ModularAlgebra;

// A reduced stage may hold what a plan evaluated whole may; the stages
// together a few times that (their cones overlap).
constexpr int64_t kReducedBudgetFactor = 4;

// One random assignment of a stage's leaves: reals uniform modulo p,
// integers over the positions shape reduction says they index (so ids
// spread over the reduced line, shard offsets included), booleans bits.
// `mirrored`: the same values under the mirrored order.
std::optional<StageValues<Alg>> random_values(const Stage& stage, uint64_t seed,
                                              bool mirrored = false) {
  Alg alg(seed, mirrored);
  auto leaf = [&](const std::string& name, DClass cls) -> uint64_t {
    const uint64_t h = XXH3_64bits_withSeed(name.data(), name.size(), seed);
    if (cls == DClass::Bool) return h & 1;
    if (cls == DClass::Int) {
      int64_t lo = 0, hi = 2;
      const int t = leaf_owner(name);
      if (t >= 0 && t < static_cast<int>(stage.value_maps.size()) && stage.value_maps[t] &&
          stage.value_maps[t]->reduced_hi() > stage.value_maps[t]->reduced_lo()) {
        lo = stage.value_maps[t]->reduced_lo();
        hi = stage.value_maps[t]->reduced_hi();
      }
      return Alg::of(Rational(static_cast<long>(lo + static_cast<int64_t>(h % (hi - lo)))));
    }
    return h % Alg::kPrime;
  };
  try {
    return evaluate_stage<Alg>(alg, stage, leaf);
  } catch (const EvalError&) {
    return std::nullopt;  // outside the plan's domain (a zero denominator)
  }
}

// The grid of blocks shaped `part` in `whole`; empty when `part` does not
// divide `whole`.
Shape grid_of(const Shape& part, const Shape& whole) {
  if (part.size() != whole.size()) return {};
  Shape grid;
  for (size_t d = 0; d < part.size(); ++d) {
    if (part[d] <= 0 || whole[d] % part[d] != 0) return {};
    grid.push_back(whole[d] / part[d]);
  }
  return grid;
}

// The stage tensors that may get a proposal: the parallel intermediates the
// plan leaves unclaimed, real-valued.
std::vector<int> candidate_tensors(const Plan& plan, const Stage& stage) {
  std::vector<int> out;
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (st.parallel && !st.free && dclass_of(st.dtype) == DClass::Real &&
        !plan.parallel.tensors[static_cast<size_t>(st.source)].of)
      out.push_back(static_cast<int>(t));
  }
  return out;
}

// What one reduced stage proposes for `candidates`, added to `out` (by
// parallel plan tensor, full-size slices): the matches of `values` that
// `mirror` (the mirrored order's values, when in the domain) confirms, as
// claim_inference.cpp does for a whole plan.
void stage_candidates(const Stage& stage, const std::vector<int>& candidates,
                      const StageValues<Alg>& values, const std::optional<StageValues<Alg>>& mirror,
                      const InferenceLimits& limits, std::vector<std::vector<InferredClaim>>& out) {
  std::vector<Valued> logical;
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (!st.parallel && values[t])
      logical.push_back(Valued{static_cast<int>(t), st.dtype, &*values[t]});
  }
  std::map<Shape, std::vector<int>> by_shape;
  for (int t : candidates)
    if (values[t] && informative(values[t]->data)) by_shape[stage.tensors[t].shape].push_back(t);
  int64_t budget = limits.max_index_cost;
  for (const auto& [shape, members] : by_shape) {
    std::optional<BlockIndex> index =
        BlockIndex::build(logical, shape, /*input_free=*/false, budget, limits.index_block_cost);
    if (!index) return;
    for (int t : members) {
      const StageTensor& pt = stage.tensors[static_cast<size_t>(t)];
      for (const BlockMatch& m : index->matches(Valued{t, pt.dtype, &*values[t]})) {
        const StageTensor& lt = stage.tensors[static_cast<size_t>(m.logical)];
        // The same grid at full size: the reduced block is that block.
        if (grid_of(pt.full_shape, lt.full_shape) != grid_of(pt.shape, lt.shape)) continue;
        if (mirror && (*mirror)[t] && (*mirror)[m.logical] &&
            !holds(*(*mirror)[t], *(*mirror)[m.logical], block_slice(pt.shape, m.block),
                   m.scale_num, m.scale_den))
          continue;
        InferredClaim claim;
        claim.parallel = pt.source;
        claim.of.tensor = lt.name;
        claim.of.logical = lt.source;
        claim.of.slice = block_slice(pt.full_shape, m.block);
        claim.of.scale_num = m.scale_num;
        claim.of.scale_den = m.scale_den;
        std::vector<InferredClaim>& known = out[static_cast<size_t>(pt.source)];
        bool seen = false;
        for (const InferredClaim& k : known)
          seen = seen ||
                 (k.of.logical == claim.of.logical && k.of.slice == claim.of.slice &&
                  k.of.scale_num == claim.of.scale_num && k.of.scale_den == claim.of.scale_den);
        if (!seen) known.push_back(std::move(claim));
      }
    }
  }
}

}  // namespace

std::vector<std::vector<InferredClaim>> reduced_candidates(const Plan& plan,
                                                           const InferenceLimits& limits,
                                                           std::string& skipped) {
  std::vector<std::vector<InferredClaim>> out(plan.parallel.tensors.size());
  std::vector<Stage> stages = build_stages(plan);
  for (Stage& stage : stages) reduce_stage_for_proposals(stage);
  // Smallest first: the whole-step stages, which overlap almost entirely,
  // come last, and each is evaluated only if it holds a tensor none before
  // it did.
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t i = 0; i < stages.size(); ++i) order.push_back({stages[i].element_count(), i});
  std::sort(order.begin(), order.end());
  std::vector<char> seen(plan.parallel.tensors.size(), 0);
  const int64_t stage_limit = limits.max_elements;
  int64_t budget = limits.max_elements * kReducedBudgetFactor;
  int too_large = 0;
  for (const auto& [n, i] : order) {
    const Stage& stage = stages[i];
    std::vector<int> candidates = candidate_tensors(plan, stage);
    if (std::all_of(candidates.begin(), candidates.end(),
                    [&](int t) { return seen[static_cast<size_t>(stage.tensors[t].source)]; }))
      continue;
    if (n > stage_limit || n > budget) {
      ++too_large;
      continue;
    }
    budget -= n;
    for (int t : candidates) seen[static_cast<size_t>(stage.tensors[t].source)] = 1;
    if (std::optional<StageValues<Alg>> values = random_values(stage, limits.seed))
      stage_candidates(stage, candidates, *values,
                       random_values(stage, limits.seed, /*mirrored=*/true), limits, out);
  }
  if (too_large > 0)
    skipped = "inside " + std::to_string(too_large) + " of " + std::to_string(stages.size()) +
              " stages, still over " + std::to_string(stage_limit) +
              " elements after shape reduction";
  return out;
}

}  // namespace shardproof::infer
