// A reduced-size counterexample lifted to full size (docs/soundness.md,
// section 5.1, "Lifted witnesses"). A refutation at reduced size keeps the
// values it was found with (ReducedValues: its leaves and its functions);
// lifting places each reduced element at the full position it stands for
// (Stage::full_position: the first positions of its piece) and fills the
// rest of every piece, either by repeating the piece's kept elements (a
// maximum, an order or a count then sees what it saw at reduced size) or
// with zeros (a sum then adds what it added at reduced size). Integers on a
// position line take the full positions their reduced values stand for
// (ValueMap::to_full). The full (or narrowed) stage is then replayed on
// those values by the concrete interpreter: only a difference there is a
// witness. Any values are inputs the contract quantifies over, so a lifted
// input that does not show the difference costs only the attempt.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/rational.h"
#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

// The values a reduced stage was refuted with.
struct ReducedValues {
  // The value of each leaf of the reduced stage ("L<t>_<i>", "P<t>_<i>").
  std::function<Rational(const std::string& leaf, DClass cls)> leaf;
  // The uninterpreted functions as the refutation had them: a solver
  // model's tables (exact arguments, then the model's default), or none
  // (testing's hashed random functions, hashed_functions()).
  std::map<std::string, std::map<std::vector<Rational>, Rational>> table;
  std::map<std::string, Rational> otherwise;
};

// Where the leaves of a stage to replay sit in the full stage: leaf name ->
// (full stage tensor, full-size index), nullopt for a leaf with no place
// (a part absent from the stage). `full` itself: identity.
using LeafPlace =
    std::function<std::optional<std::pair<int, std::vector<int64_t>>>(const std::string& leaf)>;
LeafPlace places_in(const Stage& full);

// Replays `target` (the full stage, or a stage narrowed from it, whose
// leaves `place` locates in the full stage) on `values` lifted from
// `reduced` (the same stage reduced), each fill in turn. A mismatch
// finding when some claim fails, its message naming the fill.
std::optional<Finding> replay_lifted(const Stage& target, const LeafPlace& place,
                                     const Stage& reduced, const ReducedValues& values);

// The reduced counterexample lifted with zeros, when zero_padding.h shows
// that the full stage then holds the reduced values at every kept position:
// replayed through the reduced stage, whose failing elements are named at
// their full positions. nullopt (and why) when the check refuses or no
// claim fails.
std::optional<Finding> replay_zero_padded(const Stage& full, const Stage& reduced,
                                          const ReducedValues& values, std::string& why);

}  // namespace shardproof
