// Operator semantics modulo the prime p = 2^61 - 1: the third algebra, for
// evaluating whole plans on random values without the growth of exact
// rationals (claim inference, engine/infer/).
//
// Sums, products and quotients are exact in the field, so two programs that
// are equal as rational functions agree here too (up to a division by an
// element that happens to be zero: probability about n/p). Uninterpreted
// functions are a keyed hash of their arguments: a fixed random function, as
// the proof's "for every function" needs. Comparisons and max/min use a total
// order that agrees with the rationals' on small rationals (|n|, d < 2^24,
// found by rational reconstruction) and puts every other residue outside
// them by its signed representative: max over shards of max is the max, and
// integers (positions, masks) and small fractions compare as they do in the
// concrete interpreter. What is *not* preserved for other residues is the
// order's compatibility with arithmetic (x < y does not give x + c < y + c):
// results here only ever propose claims that a proof then decides, never a
// verdict.
//
// Mirrored (the `mirrored` constructor flag): every residue outside the small
// rationals sits on the other side of them (its signed representative
// negated), the small rationals keep their order. With the same seed, the
// same values then meet the opposite outcome at every comparison involving
// one of them: claim inference keeps only the matches that hold both ways
// (a clipping coefficient min(c / norm, 1) is 1, its gradients unclipped,
// under one order of a random norm and not under the other).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/rational.h"

namespace shardproof {

class ModularAlgebra {
 public:
  using Value = uint64_t;  // a residue in [0, p)
  static constexpr uint64_t kPrime = (uint64_t{1} << 61) - 1;

  // The uninterpreted functions, on residues. Default: a keyed hash.
  using Functions = std::function<uint64_t(const std::string&, const std::vector<uint64_t>&)>;

  explicit ModularAlgebra(uint64_t function_seed = 0, bool mirrored = false)
      : seed_(function_seed), mirrored_(mirrored) {}
  explicit ModularAlgebra(Functions functions) : functions_(std::move(functions)) {}

  // r mod p; throws EvalError when r's denominator is a multiple of p.
  static Value of(const Rational& r);
  // The signed representative of v, as an integer in (-p/2, p/2].
  static int64_t signed_value(Value v);
  // The rational n/d with |n|, d < 2^24 whose residue is v, if any
  // (rational reconstruction: the scale of a claim found by matching).
  static bool small_rational(Value v, int64_t& num, int64_t& den);
  static Value inverse(Value v);  // precondition: v != 0

  Value constant(const Rational& r, DClass cls);
  Value add(const Value& a, const Value& b) const;
  Value sub(const Value& a, const Value& b) const;
  Value mul(const Value& a, const Value& b) const;
  Value div(const Value& a, const Value& b) const;  // throws EvalError when b == 0
  Value neg(const Value& a) const;
  Value maximum(const Value& a, const Value& b) const;
  Value minimum(const Value& a, const Value& b) const;
  Value sum(const std::vector<Value>& terms) const;
  Value lt(const Value& a, const Value& b) const;
  Value le(const Value& a, const Value& b) const;
  Value gt(const Value& a, const Value& b) const;
  Value ge(const Value& a, const Value& b) const;
  Value eq(const Value& a, const Value& b) const;
  Value select(const Value& cond, const Value& a, const Value& b) const;
  Value call(const std::string& fn, const std::vector<Value>& args) const;
  // real -> int: the floor of a small rational; any other residue keeps its
  // signed representative (a floor is not defined in the field).
  Value cast(const Value& v, DClass from, DClass to) const;
  Value pick(const Value& index, const std::vector<Value>& candidates) const;

 private:
  // v's place in the total order: -1, 0, 1 as a <, =, > b.
  int compare(Value a, Value b) const;

  uint64_t seed_ = 0;
  bool mirrored_ = false;
  Functions functions_;
};

}  // namespace shardproof
