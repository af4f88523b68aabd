// Stages: both graphs cut at lineage claims (design.md, "The pipeline").
//
// A *claim group* is the set of non-input parallel tensors that claim the
// same logical tensor, slice and part count. Its stage holds
//   - the parallel ops that compute the group's members, walked back from
//     each member up to parallel tensors that carry lineage (the stage's
//     parallel inputs, whose claims are assumed), and
//   - the logical ops that compute the target logical tensor, walked back up
//     to the logical tensors those parallel inputs refer to (the cut) or to
//     logical inputs.
// Proving every stage, in any order, proves every claim: by induction over
// the parallel graph's topological order each stage's assumptions are claims
// proven by other stages (or input claims, assumed by the contract).
//
// A Stage is self-contained (its own tensor and op tables), so shape
// reduction rewrites it and the encoder, the interpreter and the canonical
// form read nothing else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/attr.h"
#include "engine/core/ir.h"

namespace shardproof {

struct StageTensor {
  std::string name;  // name in its graph, for reports
  bool parallel = false;
  int source = -1;   // index in its graph
  Shape shape;       // current (possibly reduced) shape
  Shape full_shape;  // shape in the plan
  DType dtype = DType::F32;
  bool free = false;           // a stage input: logical cut/input, or parallel tensor with lineage
  bool logical_input = false;  // a logical graph input (its integers are trusted indices)
  // Parallel tensors only: the claim, with `tensor` resolved to a stage
  // tensor index in `logical_index` (slice in current coordinates).
  std::optional<Lineage> of;
  int logical_index = -1;
};

struct StageOp {
  std::string op;
  AttrMap attrs;             // current (possibly reduced) attributes
  std::vector<int> in, out;  // stage tensor indices
  std::vector<int> group;
  bool parallel = false;
  int source = -1;           // op index in its graph
  std::string display_name;  // for reports
};

// Shape reduction's map of integer *values* that are positions on a line
// (docs/soundness.md, "Integer positions"): reduced value v of a tensor is
// reduced line position v + reduced_offset; full value u is full line
// position u + full_offset. Inside a piece a reduced position stands for the
// piece's first positions (as full_position does for axes); outside the line
// values keep their distance to its nearest end.
struct ValueMap {
  std::vector<int64_t> full_bounds;     // the line's boundaries, full coordinates
  std::vector<int64_t> reduced_bounds;  // the same boundaries, reduced coordinates
  int64_t full_offset = 0;
  int64_t reduced_offset = 0;

  int64_t to_full(int64_t v) const {
    const int64_t q = v + reduced_offset;
    int64_t p = 0;
    if (q < reduced_bounds.front()) {
      p = q - reduced_bounds.front() + full_bounds.front();
    } else if (q >= reduced_bounds.back()) {
      p = q - reduced_bounds.back() + full_bounds.back();
    } else {
      size_t j = std::upper_bound(reduced_bounds.begin(), reduced_bounds.end(), q) -
                 reduced_bounds.begin() - 1;
      p = full_bounds[j] + (q - reduced_bounds[j]);
    }
    return p - full_offset;
  }
  // The reduced values that are positions on the line: [reduced_lo, reduced_hi).
  int64_t reduced_lo() const { return reduced_bounds.front() - reduced_offset; }
  int64_t reduced_hi() const { return reduced_bounds.back() - reduced_offset; }
};

struct Stage {
  int id = 0;
  std::string title;         // e.g. "out[0:8, 0:16] (2 parts)"
  int target = -1;           // stage tensor index of the logical tensor claimed
  SliceSpec slice;           // the claimed slice, current coordinates
  int64_t parts = 0;         // 0: plain claims; n: additive parts 0..n-1
  // A scaled claim group's factor (numerator, denominator; 1/1: none): the
  // members are scale x the target (or their parts add up to that).
  std::pair<int64_t, int64_t> scale{1, 1};
  bool scaled() const { return scale != std::pair<int64_t, int64_t>{1, 1}; }
  std::vector<int> members;  // stage tensor indices of the claiming parallel tensors
  std::vector<StageTensor> tensors;
  std::vector<StageOp> ops;  // logical ops, then parallel ops, each producers first

  // Filled by shape reduction: for each tensor and dim, the full-size
  // position of each current position. Empty when not reduced (identity):
  // identity vectors of full-size stages would cost megabytes per stage.
  std::vector<std::vector<std::vector<int64_t>>> full_position;
  int64_t full_index(int tensor, int dim, int64_t position) const {
    return full_position.empty() ? position : full_position[tensor][dim][position];
  }
  // Filled by shape reduction for integer tensors whose values are positions
  // on a line (indexed by tensor; empty when there are none).
  std::vector<std::optional<ValueMap>> value_maps;
  bool reduced = false;
  std::string reduction_note;  // why a stage kept (some) full sizes

  int64_t element_count() const;
};

// A stage as the cut defines it: its claim group and the ops of its two
// cones (the logical one holding only the ops the claimed region demands,
// demanded_region.h). A stage is a function of its unit, the tensor
// declarations and the contents of the ops in its cones: an edit to any
// other op leaves it as it was. (An op outside the logical cone has no
// demanded output, and the demand reaching the cone is computed from the
// cone's own ops, so an edit there changes neither the cone nor the stage.)
struct StageUnit {
  int logical = -1;                              // the claimed logical tensor
  SliceSpec slice;                               // the claimed slice
  int64_t parts = 0;                             // 0: plain claims; n: additive parts 0..n-1
  OverSpec over;                                 // a restricted claim's set (empty: none)
  std::pair<int64_t, int64_t> scale{1, 1};       // a scaled claim's factor (1/1: none)
  std::vector<int> members;                      // parallel tensors of the claim group
  std::vector<int> logical_cone, parallel_cone;  // op indices, producers first
  // Logical contractions the stage restricts (the target's producer for a
  // restricted group, and those of restricted inputs): the stage reads them
  // although they are not in the logical cone.
  std::vector<int> restricted;
};

// The plan's stage units, one per claim group (or two for a mixed group), in
// a deterministic order, on up to `jobs` threads (0: one per core).
std::vector<StageUnit> cut_units(const Plan& plan, int jobs = 1);

// Computes `unit`'s cones from its claim group (again after an edit of an
// op in them: the demanded logical ops may have changed).
void cut_cones(const Plan& plan, StageUnit& unit);

// The stage of one unit, numbered `id` (1-based position among the units).
Stage build_stage(const Plan& plan, const StageUnit& unit, int id);

// A stage's title (Stage::title) without building it.
std::string stage_title(const Plan& plan, const StageUnit& unit);

// Cuts the plan into one stage per unit (cut_units then build_stage).
std::vector<Stage> build_stages(const Plan& plan, int jobs = 1);
// The stages of units cut before, on up to `jobs` threads.
std::vector<Stage> build_stages(const Plan& plan, const std::vector<StageUnit>& units, int jobs);

// "out[0:8, 0:16]" for messages.
std::string slice_to_string(const std::string& tensor, const SliceSpec& slice);

}  // namespace shardproof
