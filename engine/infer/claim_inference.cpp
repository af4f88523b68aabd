#include "engine/infer/claim_inference.h"

#include <algorithm>
#include <map>
#include <set>

#include "engine/core/tensor.h"
#include "engine/infer/block_match.h"
#include "engine/infer/claim_choice.h"
#include "engine/infer/input_free.h"
#include "engine/infer/plan_values.h"
#include "engine/infer/reduced_inference.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage_eval.h"

namespace shardproof::infer {
namespace {

// Evaluates with the largest bound on integer inputs that keeps every index
// in range: ids spread over many rows make the values tell tensors apart.
// `mirror`: the same values under the mirrored order, when in the domain.
std::optional<PlanValues> evaluate(const Plan& plan, uint64_t seed,
                                   std::optional<PlanValues>& mirror) {
  std::set<int64_t, std::greater<>> bounds = {1};
  for (const TensorDecl& d : plan.logical.tensors)
    for (int64_t n : d.shape) bounds.insert(std::max<int64_t>(n, 1));
  for (int64_t bound : bounds) {
    try {
      PlanValues values = evaluate_plan(plan, seed, bound);
      try {
        mirror = evaluate_plan(plan, seed, bound, /*mirrored=*/true);
      } catch (const EvalError&) {
      }
      return values;
    } catch (const EvalError&) {
    }
  }
  return std::nullopt;
}

// Whether a match holds under the mirrored order too (modular_algebra.h):
// one comparison of a random value decides a scalar clamp's saturation,
// and a saturated one makes a tensor equal to its unclipped self. Without
// mirrored values (outside the domain) every match stands.
bool confirmed(const std::optional<PlanValues>& mirror, int parallel, const Lineage& of) {
  if (!mirror) return true;
  const std::optional<Residues>& p = mirror->parallel[static_cast<size_t>(parallel)];
  const std::optional<Residues>& l = mirror->logical[static_cast<size_t>(of.logical)];
  return !p || !l || holds(*p, *l, of.slice, of.scale_num, of.scale_den);
}

// An input-free tensor is claimed only when its claim's stage (a handful of
// tensors its size) can be decided by exact evaluation (prove/
// input_free_stage.h, up to ProverOptions::max_test_elements = 4,000,000).
constexpr int64_t kMaxInputFreeTensor = 500'000;

// The value matches' claims, one per tensor, with the masks' (chosen apart,
// so that they never move where the others cut), by parallel tensor.
std::vector<InferredClaim> with_masks(const Plan& plan, std::vector<InferredClaim> masks,
                                      std::vector<std::vector<InferredClaim>> candidates) {
  std::vector<InferredClaim> valued = choose_claims(plan, std::move(candidates));
  masks.insert(masks.end(), valued.begin(), valued.end());
  std::sort(masks.begin(), masks.end(),
            [](const InferredClaim& a, const InferredClaim& b) { return a.parallel < b.parallel; });
  return masks;
}

int64_t graph_elements(const Graph& g) {
  int64_t n = 0;
  for (const TensorDecl& d : g.tensors) n += element_count(d.shape);
  return n;
}

}  // namespace

InferenceResult infer_claims(const Plan& plan, const InferenceLimits& limits) {
  InferenceResult result;
  if (plan.compact) {
    result.skipped = "a compact plan verified per class";
    return result;
  }
  // Masks no input reaches first, matched on their own (input_free.h).
  std::vector<InferredClaim> masks =
      choose_claims(plan, input_free_candidates(plan, kMaxInputFreeTensor, limits.max_elements));
  const int64_t elements = graph_elements(plan.logical) + graph_elements(plan.parallel);
  // Too large to evaluate or index whole: evaluate each stage at reduced
  // size, on the plan cut at its masks (a mask's comparisons of positions
  // keep the sequence lines of the stage that holds it whole, even for
  // proposals).
  auto by_reduced_stages = [&](const std::string& over) {
    std::string why;
    std::vector<std::vector<InferredClaim>> candidates =
        reduced_candidates(with_claims(plan, masks), limits, why);
    if (!why.empty()) result.skipped = why + "; " + over;
    result.claims = with_masks(plan, std::move(masks), std::move(candidates));
    return result;
  };
  if (elements > limits.max_elements)
    return by_reduced_stages("the plan holds " + std::to_string(elements) + " elements, over the " +
                             std::to_string(limits.max_elements) + " evaluated whole");
  std::optional<PlanValues> mirror;
  std::optional<PlanValues> values = evaluate(plan, limits.seed, mirror);
  if (!values) {
    result.skipped = "no random values inside the plan's domain";
    return result;
  }

  std::vector<Valued> logical;
  for (size_t l = 0; l < plan.logical.tensors.size(); ++l)
    if (values->logical[l])
      logical.push_back(
          Valued{static_cast<int>(l), plan.logical.tensors[l].dtype, &*values->logical[l]});
  // Candidates: unclaimed real intermediates with informative values.
  std::map<Shape, std::vector<int>> by_shape;
  for (size_t t = 0; t < plan.parallel.tensors.size(); ++t) {
    const TensorDecl& d = plan.parallel.tensors[t];
    const std::optional<Residues>& v = values->parallel[t];
    if (d.of || plan.parallel.producer[t] < 0 || !v || dclass_of(d.dtype) != DClass::Real) continue;
    if (!informative(v->data)) continue;
    by_shape[d.shape].push_back(static_cast<int>(t));
  }

  // Every matching block of every candidate tensor; choose_claims picks one.
  std::vector<std::vector<InferredClaim>> candidates(plan.parallel.tensors.size());
  int64_t budget = limits.max_index_cost;
  for (const auto& [shape, members] : by_shape) {
    std::optional<BlockIndex> index =
        BlockIndex::build(logical, shape, /*input_free=*/false, budget, limits.index_block_cost);
    if (!index)
      return by_reduced_stages("matching the whole plan would exceed the index budget (" +
                               std::to_string(limits.max_index_cost) + ")");
    for (int t : members) {
      const TensorDecl& pd = plan.parallel.tensors[static_cast<size_t>(t)];
      for (const BlockMatch& m : index->matches(Valued{t, pd.dtype, &*values->parallel[t]})) {
        const TensorDecl& ld = plan.logical.tensors[static_cast<size_t>(m.logical)];
        InferredClaim claim;
        claim.parallel = t;
        claim.of.tensor = ld.name;
        claim.of.logical = m.logical;
        claim.of.slice = block_slice(shape, m.block);
        claim.of.scale_num = m.scale_num;
        claim.of.scale_den = m.scale_den;
        if (confirmed(mirror, t, claim.of))
          candidates[static_cast<size_t>(t)].push_back(std::move(claim));
      }
    }
  }
  result.claims = with_masks(plan, std::move(masks), std::move(candidates));
  return result;
}

Plan with_claims(const Plan& plan, const std::vector<InferredClaim>& claims) {
  Plan out = plan;
  for (const InferredClaim& c : claims)
    out.parallel.tensors[static_cast<size_t>(c.parallel)].of = c.of;
  return out;
}

}  // namespace shardproof::infer
