#include "engine/infer/plan_values.h"

#include <map>
#include <random>
#include <tuple>

#include "engine/ops/graph_eval.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage_eval.h"

namespace shardproof::infer {
namespace {

class Sampler {
 public:
  Sampler(uint64_t seed, int64_t int_bound) : rng_(seed), int_bound_(int_bound) {}

  Residues random(const Shape& shape, DClass cls) {
    Residues t;
    t.shape = shape;
    t.cls = cls;
    const int64_t n = element_count(shape);
    t.data.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t.data.push_back(one(cls));
    return t;
  }

 private:
  uint64_t one(DClass cls) {
    if (cls == DClass::Bool) return rng_() & 1;
    if (cls == DClass::Int) return std::uniform_int_distribution<int64_t>(0, int_bound_ - 1)(rng_);
    return std::uniform_int_distribution<uint64_t>(0, ModularAlgebra::kPrime - 1)(rng_);
  }

  std::mt19937_64 rng_;
  int64_t int_bound_;
};

}  // namespace

PlanValues evaluate_plan(const Plan& plan, uint64_t seed, int64_t int_bound, bool mirrored) {
  ModularAlgebra alg(seed, mirrored);
  Sampler sample(seed, int_bound);
  PlanValues v;
  v.logical.resize(plan.logical.tensors.size());
  v.parallel.resize(plan.parallel.tensors.size());
  for (int t : plan.logical.inputs) {
    const TensorDecl& d = plan.logical.tensors[static_cast<size_t>(t)];
    v.logical[static_cast<size_t>(t)] = sample.random(d.shape, dclass_of(d.dtype));
  }
  run_graph(alg, plan.logical, v.logical);

  // The parts of one part set: (logical tensor, slice, part count) -> values by k.
  std::map<std::tuple<int, SliceSpec, int64_t>, std::vector<Residues>> part_sets;
  for (int t : plan.parallel.inputs) {
    const TensorDecl& d = plan.parallel.tensors[static_cast<size_t>(t)];
    const DClass cls = dclass_of(d.dtype);
    std::optional<Residues>& value = v.parallel[static_cast<size_t>(t)];
    const std::optional<Lineage>& of = d.of;
    if (!of || !of->over.empty() || of->logical < 0 ||
        !v.logical[static_cast<size_t>(of->logical)]) {
      value = sample.random(d.shape, cls);
      continue;
    }
    Residues claimed = slice_of(*v.logical[static_cast<size_t>(of->logical)], of->slice);
    if (of->has_part) {
      std::vector<Residues>& parts = part_sets[{of->logical, of->slice, of->part_n}];
      if (parts.empty()) {
        Residues rest = claimed;
        for (int64_t k = 0; k + 1 < of->part_n; ++k) {
          parts.push_back(sample.random(claimed.shape, claimed.cls));
          for (size_t i = 0; i < rest.data.size(); ++i)
            rest.data[i] = alg.sub(rest.data[i], parts.back().data[i]);
        }
        parts.push_back(std::move(rest));
      }
      claimed = parts[static_cast<size_t>(of->part_k)];
    }
    if (of->scaled()) {
      const uint64_t factor = ModularAlgebra::of(of->scale());
      for (uint64_t& x : claimed.data) x = alg.mul(factor, x);
    }
    claimed.cls = cls;
    value = std::move(claimed);
  }
  run_graph(alg, plan.parallel, v.parallel);
  return v;
}

}  // namespace shardproof::infer
