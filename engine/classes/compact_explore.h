// Exploration of a compact plan (shardproof-plan/1.1) around one *anchor*
// coordinate, without expanding it: the claims the anchor's instances make,
// their claim groups (every instance that claims the same logical tensor,
// slice and part count, found by solving affine equations), and the cones of
// ops that compute them, walked back to claimed tensors. What it visits is
// added to a Selection, from which the part of the expansion those stages
// need is written (compact_expand.h, expand_selected).
//
// Every integer decision the walk makes (a condition, a name match, a
// coordinate in range, a sibling's equation) is the sign of an affine function
// of the anchor, and every value it copies from the plan into a name of the
// logical graph or an attribute is an affine function of the anchor. The walk
// *records* those signs and values (hashed, in order; the walk behind each
// instance as one hash of its own, computed once). Two anchors with equal
// records walk alike; the class verifier relies on that (docs/soundness.md,
// "Coordinate classes").
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/format/compact/compact_graph.h"
#include "engine/format/compact/selection.h"

namespace shardproof::compact {

// Why the walk could not go on: the plan leaves the fragment the class
// verifier handles (docs/soundness.md), or a reference does not resolve.
struct ExploreError {
  std::string message;
};

// One claim instance an anchor makes: its template and coordinate.
struct SeedClaim {
  uint32_t program = 0, element = 0;
  Coord c{};
};

struct AnchorRecord {
  uint64_t decisions = 0;  // hash of every recorded sign and value, in order
  int64_t decision_count = 0;
  std::vector<SeedClaim> seeds;  // in template order
};

class Explorer {
 public:
  explicit Explorer(const CompactGraph& g);
  ~Explorer();
  Explorer(const Explorer&) = delete;
  Explorer& operator=(const Explorer&) = delete;

  // Walks everything the claims of `anchor`'s instances need; adds it to
  // `selection`. Adds every op instance the anchor runs (claimed or not) and
  // the tensors it names to `checked`, for the ops' own rules. Throws
  // ExploreError. An instance's walk is done once for all anchors (its
  // record is kept as a hash), so every call must pass the same two
  // selections.
  AnchorRecord explore(const Coord& anchor, Selection& selection, Selection& checked);

  struct Impl;  // compact_explore_impl.h, internal to engine/classes

 private:
  Impl* impl_;
};

}  // namespace shardproof::compact
