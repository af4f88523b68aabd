// Expansion of a compact parallel graph (shardproof-plan/1.1) into the v1
// parallel graph it denotes (docs/plan-format.md, "Expansion"), written as
// v1 JSON so that every v1 rule and the verifier apply unchanged; and the
// way back, from a place in the expansion to the template and instance
// that made it, for messages. Internal to the plan parser.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/diagnostic.h"
#include "engine/format/compact/compact_graph.h"
#include "engine/format/compact/selection.h"

namespace shardproof::compact {

// Beyond this many op (or tensor) instances the expansion is refused: such
// plans need the per-class verifier, which does not expand. Expanded plans
// cost about 4 KB and 28 us per op (600k ops: 2.4 GB, 17 s), so 10^6 keeps
// one plan within a few GB of a shared machine.
inline constexpr int64_t kMaxInstances = 1'000'000;
// And beyond this estimated memory (measured: about 2 KB per op and 1 KB per
// tensor instance while expanding and checking), whatever the counts: a
// plan of a few KB must not take gigabytes before anything is decided.
inline constexpr int64_t kMaxExpansionBytes = int64_t{1} << 30;
inline constexpr int64_t kBytesPerOpInstance = 2048, kBytesPerTensorInstance = 1024;

// Which template (program, element) and which instance made an expanded
// tensor or op.
struct Origin {
  uint32_t program = 0, element = 0;
  std::array<int32_t, kAxisCount> c{};
};

struct Expansion {
  std::string text;  // the v1 parallel graph
  std::vector<Origin> tensors, ops;
  std::unordered_map<std::string, uint32_t> tensor_index;
  std::vector<uint32_t> inputs, outputs;  // expanded tensor indices
};

// Throws plan_detail::InvalidPlan (send-off-mesh, instance-collision,
// plan-too-large).
Expansion expand(const CompactGraph& g);

// The part of the expansion `selection` holds (compact_explore.h), for the
// class verifier: the selected tensors and ops in expansion order; a selected
// tensor no selected op writes is a graph input; no outputs.
Expansion expand_selected(const CompactGraph& g, const Selection& selection);
// The plan (its logical graph) with the parallel graph `expansion` holds,
// read with LineageScope::Stages; throws plan_detail::InvalidPlan placed at
// the compact template. Frees expansion.text once parsed. Defined by the
// plan parser.
Plan read_selected(const Plan& plan, Expansion& expansion);
// The number of op instances the expansion has (a collective counts once
// per group), computed per axis without enumerating the mesh.
int64_t op_instance_count(const CompactGraph& g);
// Checks the graph rules (not lineage) of the part `expansion` holds: each
// op's references, placement and shape rule. Throws plan_detail::InvalidPlan
// placed at the compact template. Defined by the plan parser.
void check_selected(const Plan& plan, const Expansion& expansion);
// Whether expand(g) would refuse the plan as too large (counts only).
bool exceeds_expansion_limit(const CompactGraph& g);
// `d` names a place in the expansion's text; the same failure, placed at the
// compact file's template, with the instance's coordinates.
Diagnostic locate(const CompactGraph& g, const Expansion& e, const Diagnostic& d);

}  // namespace shardproof::compact
