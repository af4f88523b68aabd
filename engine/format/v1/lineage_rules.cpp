#include "engine/format/v1/lineage_rules.h"

#include <algorithm>

namespace shardproof::plan_detail {
namespace {

// Sweeps one dimension at a time over the boundaries of the boxes that
// cover the prefix so far; returns an element no box covers.
std::optional<std::vector<int64_t>> uncovered(const Shape& shape,
                                              const std::vector<SliceSpec>& boxes,
                                              std::vector<int64_t>& prefix) {
  size_t d = prefix.size();
  if (d == shape.size()) {
    if (boxes.empty()) return prefix;
    return std::nullopt;
  }
  std::set<int64_t> cut_set = {0, shape[d]};
  for (const SliceSpec& b : boxes)
    for (int64_t c : {b[d].first, b[d].second}) cut_set.insert(c);
  std::vector<int64_t> cuts(cut_set.begin(), cut_set.end());
  // Each box goes to the segments it spans: near-linear for partitions.
  std::vector<std::vector<SliceSpec>> spanning(cuts.size() - 1);
  for (const SliceSpec& b : boxes) {
    size_t first = std::lower_bound(cuts.begin(), cuts.end(), b[d].first) - cuts.begin();
    size_t last = std::lower_bound(cuts.begin(), cuts.end(), b[d].second) - cuts.begin();
    for (size_t s = first; s < last; ++s) spanning[s].push_back(b);
  }
  for (size_t s = 0; s + 1 < cuts.size(); ++s) {
    if (cuts[s] >= shape[d]) break;
    prefix.push_back(cuts[s]);
    if (std::optional<std::vector<int64_t>> hole = uncovered(shape, spanning[s], prefix))
      return hole;
    prefix.pop_back();
  }
  return std::nullopt;
}

}  // namespace

void LineageRules::add(const ClaimFact& claim) {
  const size_t order = added_++;
  if (claim.has_part) {
    auto [it, fresh] = parts_.try_emplace(
        PartSetKey{claim.tensor, claim.slice, claim.n, claim.scale_num, claim.scale_den});
    if (fresh) it->second.first = claim.origin, it->second.order = order;
    it->second.ks.insert(claim.k);
    if (claim.output) it->second.output_ks.insert(claim.k);
  } else if (claim.output && !claim.restricted && claim.scale_num == 1 && claim.scale_den == 1) {
    plain_[claim.tensor].push_back(claim.slice);
  }
}

std::optional<MissingPart> LineageRules::first_incomplete_part_set() const {
  std::optional<MissingPart> first;
  size_t first_order = 0;
  for (const auto& [key, set] : parts_) {
    int64_t missing = 0;
    while (set.ks.count(missing)) ++missing;
    if (missing >= std::get<2>(key)) continue;
    if (!first || set.order < first_order) {
      first = MissingPart{key, missing, set.first};
      first_order = set.order;
    }
  }
  return first;
}

std::optional<CoverageHole> LineageRules::first_coverage_hole(const Graph& logical) const {
  for (size_t i = 0; i < logical.outputs.size(); ++i) {
    const TensorDecl& out = logical.tensors[logical.outputs[i]];
    if (element_count(out.shape) == 0) continue;
    std::vector<SliceSpec> covered;
    if (auto it = plain_.find(out.name); it != plain_.end()) covered = it->second;
    // A part set covers its slice when the outputs hold every part.
    for (auto it = parts_.lower_bound(PartSetKey{out.name, {}, 0, 0, 0});
         it != parts_.end() && std::get<0>(it->first) == out.name; ++it)
      if (static_cast<int64_t>(it->second.output_ks.size()) == std::get<2>(it->first) &&
          std::get<3>(it->first) == 1 && std::get<4>(it->first) == 1)
        covered.push_back(std::get<1>(it->first));
    if (std::optional<std::vector<int64_t>> hole = first_uncovered(out.shape, covered))
      return CoverageHole{i, std::move(*hole), std::move(covered)};
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> first_uncovered(const Shape& shape,
                                                    const std::vector<SliceSpec>& boxes) {
  std::vector<int64_t> prefix;
  return uncovered(shape, boxes, prefix);
}

}  // namespace shardproof::plan_detail
