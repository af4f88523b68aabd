// Refutation by testing: before any solver call, the stage runs in the
// concrete interpreter on a few sets of random inputs, with fixed arbitrary
// random functions (a hash of the arguments) for the uninterpreted ones. Every function is allowed
// by the contract (a proof must hold for any), so a difference found this way is a real
// counterexample, and most bugs are found without Z3 at all.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "engine/prove/lifted_values.h"
#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

class FunctionTable;  // engine/ops/algebra.h

// Positions a leaf's integer values point into, [lo, hi) in the tensor's
// own values: from shape reduction's value map, so random ids spread over
// the (reduced) line they index, shard offsets and masks included.
struct IntRange {
  int64_t lo = 0, hi = 2;
};
// The range of integer leaf "L<t>_<i>" / "P<t>_<i>" ({0, 2} when the stage
// says nothing about it).
IntRange int_range(const Stage& stage, const std::string& name);
IntRange int_range(const std::vector<std::optional<ValueMap>>& maps, const std::string& name);

// The parallel ops the given stage tensors depend on, nearest first.
std::vector<std::string> producing_ops(const Stage& stage, const std::vector<int>& tensors);

// A "mismatch" finding when some trial shows a claim failing; nullopt when
// every trial agreed (or left the plan's domain, e.g. a zero denominator).
// With `aim_at_constants` (a stage the solver cannot take), trials are
// added in which integer inputs take the values next to the stage's integer
// constants (an off-by-one shard bound shows on one id in 10^5).
// `values`, when given, receives the values of the failing trial (for a
// lifted replay at full size, lifted_values.h).
// `in_domain`, when given, is set when some trial ran the whole stage inside
// the plan's domain (no zero denominator, no index out of range): those
// values satisfy every assumption the stage makes at once.
std::optional<Finding> refute_by_testing(const Stage& stage, int trials,
                                         bool aim_at_constants = false,
                                         std::shared_ptr<const ReducedValues>* values = nullptr,
                                         bool* in_domain = nullptr);

// One concrete run of `stage` on `leaf`'s values and `functions`: the
// mismatch finding of its first failing claim (`how` ends its message), or
// nullopt when every claim holds or the run leaves the plan's domain.
std::optional<Finding> refute_with(const Stage& stage,
                                   const std::function<Rational(const std::string&, DClass)>& leaf,
                                   FunctionTable& functions, const std::string& how,
                                   bool* in_domain = nullptr);

// Testing's fixed random functions (a hash of name and arguments).
std::unique_ptr<FunctionTable> hashed_functions();

}  // namespace shardproof
