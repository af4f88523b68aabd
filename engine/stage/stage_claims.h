// What a stage must show, built the same way on both algebras: for every
// claim, pairs (parallel value, logical value) that must be equal.
#pragma once

#include <string>
#include <vector>

#include "engine/stage/stage_eval.h"

namespace shardproof {

template <class V>
struct ElementCheck {
  int64_t element;  // flat index inside the claimed slice
  V parallel;
  V logical;
};

template <class V>
struct ClaimChecks {
  std::vector<int> tensors;  // stage indices of the parallel tensors involved
  std::string label;         // e.g. "tp0.out", or "parts of out (tp0.partial + tp1.partial)"
  std::vector<ElementCheck<V>> checks;
  std::string missing;  // a part of the set is absent from the stage (cannot be proven here)
};

// Plain claims: one ClaimChecks per member (each replica must equal the
// logical slice). Parts: one ClaimChecks for the sum of one representative
// of each part, plus one per further replica of a part (it must equal its
// representative). A scaled group compares with the logical slice times its
// scale (stage_eval.h, scaled_by).
template <class Alg>
std::vector<ClaimChecks<typename Alg::Value>> build_claims(Alg& alg, const Stage& stage,
                                                           const StageValues<Alg>& values) {
  using V = typename Alg::Value;
  std::vector<ClaimChecks<V>> claims;
  Tensor<V> logical = scaled_by(alg, slice_of(*values[stage.target], stage.slice), stage.scale);
  if (stage.parts == 0) {
    for (int m : stage.members) {
      ClaimChecks<V> c;
      c.tensors = {m};
      c.label = stage.tensors[m].name;
      for (int64_t i = 0; i < logical.size(); ++i)
        c.checks.push_back({i, values[m]->data[i], logical.data[i]});
      claims.push_back(std::move(c));
    }
    return claims;
  }
  std::vector<int> representative(stage.parts, -1);
  for (int m : stage.members) {
    int64_t k = stage.tensors[m].of->part_k;
    if (representative[k] < 0) {
      representative[k] = m;
      continue;
    }
    ClaimChecks<V> c;
    c.tensors = {m, representative[k]};
    c.label = stage.tensors[m].name + " (replica of " + stage.tensors[representative[k]].name + ")";
    for (int64_t i = 0; i < logical.size(); ++i)
      c.checks.push_back({i, values[m]->data[i], values[representative[k]]->data[i]});
    claims.push_back(std::move(c));
  }
  ClaimChecks<V> sum;
  sum.label = "sum of parts";
  for (int64_t k = 0; k < stage.parts; ++k) {
    if (representative[k] < 0) {
      sum.missing = "part " + std::to_string(k) + " of " + std::to_string(stage.parts) +
                    " is not computed in this stage";
      continue;
    }
    sum.tensors.push_back(representative[k]);
  }
  if (sum.missing.empty()) {
    sum.label = "";
    for (int t : sum.tensors) sum.label += (sum.label.empty() ? "" : " + ") + stage.tensors[t].name;
    for (int64_t i = 0; i < logical.size(); ++i) {
      std::vector<V> terms;
      for (int t : sum.tensors) terms.push_back(values[t]->data[i]);
      sum.checks.push_back({i, alg.sum(terms), logical.data[i]});
    }
  }
  claims.insert(claims.begin(), std::move(sum));
  return claims;
}

}  // namespace shardproof
