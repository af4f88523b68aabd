// The layer shift of a run of pipeline stages (docs/soundness.md, 2.2,
// "Pipeline stages as one class"). A compact plan may write its middle
// pipeline stages as one program whose logical names are affine in pp
// ("l{8*pp + 3}.wq"). The explorer records such a name's numbers relative
// to the anchor's pp, so corners at pp = lo and pp = hi that agree claim, at
// every p between, the tensors their claims name shifted by k * (p - lo) in
// each number whose template has pp-coefficient k. A stage at p is then the
// stage at lo with its parallel numbers moved (which the corners' verdict
// keys cover) and its logical cone replaced by the cone of the shifted
// claim: this file checks that the shifted cone is the corner's cone
// renamed (same operators, attributes, shapes and dtypes, operand by
// operand, with the corner's boundary tensors carried to their shifted
// names), so that the canonical stage, which holds no name, is the same.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/format/compact/compact_expand.h"
#include "engine/format/compact/compact_graph.h"
#include "engine/stage/stage.h"

namespace shardproof::compact {

// Checks, for every stage unit of the batch at pp = lo (its sub-plan `sub`,
// written from `expansion`), that its logical cone at lo + d, for d in
// 1..span, is the corner's under the shift. Nothing (the shift holds), or
// why not: then the run must be verified pipeline stage by pipeline stage.
// A batch whose claims name no number affine in pp holds trivially (every p
// names the same tensors).
std::optional<std::string> check_layer_shift(const CompactGraph& g, const Plan& sub,
                                             const Expansion& expansion,
                                             const std::vector<StageUnit>& units, int64_t span);

// `name` with each run of digits i moved by shift[i] (as many runs as
// shifts); nothing if a moved number would be negative or is not written in
// plain decimal.
std::optional<std::string> shifted_name(const std::string& name, const std::vector<int64_t>& shift);

}  // namespace shardproof::compact
