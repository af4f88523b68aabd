// The plan-wide lineage rules (plan-format.md, "Lineage": rule 3, coverage
// of the logical outputs, and rule 4, complete part sets), stated once over
// a stream of claims. An expanded plan adds each parallel tensor's claim
// (plan_validation_lineage.cpp); a compact plan that the class verifier
// keeps unexpanded adds each claim template's instances
// (classes/compact_rules.cpp). Each caller words and places the message of
// a broken rule; what is broken is decided here only, so the two paths
// cannot drift apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/core/ir.h"

namespace shardproof::plan_detail {

// One claim as these rules read it. `origin` is the caller's name for
// where the claim was written (a tensor index, a template index).
struct ClaimFact {
  std::string tensor;  // the claimed logical tensor
  SliceSpec slice;
  bool has_part = false;
  int64_t k = 0, n = 1;
  bool restricted = false;  // "over": a partial sum, which covers nothing
  bool output = false;      // a parallel output's claim
  size_t origin = 0;
  int64_t scale_num = 1, scale_den = 1;  // "scale": a multiple, which covers nothing
};

// A part set is named by (tensor, slice, n, scale): parts scaled alike add
// up to the scaled slice, so a set is complete only in one scale.
using PartSetKey = std::tuple<std::string, SliceSpec, int64_t, int64_t, int64_t>;

// Rule 4 broken: a part set some tensor claims lacks part `missing`.
struct MissingPart {
  PartSetKey set;
  int64_t missing = 0;
  size_t origin = 0;  // the first claim added to the set
};

// Rule 3 broken: element `hole` of logical output `output` (its position in
// the logical graph's outputs) is covered by none of `covered`.
struct CoverageHole {
  size_t output = 0;
  std::vector<int64_t> hole;
  std::vector<SliceSpec> covered;
};

class LineageRules {
 public:
  void add(const ClaimFact& claim);

  // The incomplete part set whose first claim was added first, or nothing.
  std::optional<MissingPart> first_incomplete_part_set() const;

  // The first logical output (in output order) with an element that no
  // parallel output covers: plain claims of outputs, and the slices of part
  // sets that the outputs hold completely (parts held by intermediate
  // tensors sum to nothing the plan returns). Restricted and scaled claims
  // cover nothing.
  std::optional<CoverageHole> first_coverage_hole(const Graph& logical) const;

 private:
  struct PartSet {
    std::set<int64_t> ks, output_ks;
    size_t first = 0, order = 0;  // origin of the first claim, and when it was added
  };
  std::map<PartSetKey, PartSet> parts_;
  std::map<std::string, std::vector<SliceSpec>> plain_;  // outputs' plain claims, by tensor
  size_t added_ = 0;
};

// An element of `shape` that none of `boxes` holds (rule 3), or nothing.
std::optional<std::vector<int64_t>> first_uncovered(const Shape& shape,
                                                    const std::vector<SliceSpec>& boxes);

}  // namespace shardproof::plan_detail
