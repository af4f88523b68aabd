// Reuse of a verified batch for a batch with the same content up to names
// (docs/soundness.md, "Batches equal up to names").
//
// The class verifier verifies a compact plan one pipeline stage (batch of
// corners) at a time. A model's pipeline stages between the first and the
// last hold the same layers under other layer numbers, so their selected
// sub-plans are the same graph with other names: other tensor names, other
// logical tensors (l24.out for l25.out), other rank numbers. Such a sub-plan
// cuts into the same stages with the same verdict keys and verdicts, index
// for index; verifying it again is most of a batch's cost.
//
// The *renamed content* of a sub-plan is its parallel graph in index order
// and its stage units in order (claim group, parallel cone by index, logical
// cone and restricted ops written out), with every name left out and every
// logical tensor, logical op and rank replaced by its number of first
// appearance. Equal renamed contents mean the identity on parallel indices
// with one bijection of logical tensors, ops and ranks maps one sub-plan
// and its stages onto the other; stages hold no names and no rank numbers,
// so stage unit i of both has the same keys and verdict.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/decide/plan_run.h"
#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

// XXH3-128 (hex) of the renamed content of `sub`, an expanded plan, and
// its stage units (cut_units(sub)).
std::string renamed_content_digest(const Plan& sub, const std::vector<StageUnit>& units);

// What a batch's verification leaves for a batch of the same renamed
// content: the verdict key of the stage of each parallel tensor, by index.
struct VerifiedBatch {
  std::vector<int> unit_of;                // parallel tensor -> stage unit, or -1
  std::vector<std::string> verdict_keys;   // per stage unit
  std::map<std::string, Decided> decided;  // how each distinct stage was decided
  Report report;                           // equivalent, no findings
};

// Verified batches by renamed content. Only a batch proven equivalent is
// kept: one with findings names its own tensors, and is verified again.
class BatchReuse {
 public:
  const VerifiedBatch* find(const std::string& digest) const;
  void keep(const std::string& digest, const Report& report, const StageRecord& record,
            std::vector<int> unit_of);
  int64_t reused() const { return reused_; }
  void count_reuse() { ++reused_; }

 private:
  std::map<std::string, VerifiedBatch> batches_;
  int64_t reused_ = 0;
};

}  // namespace shardproof
