// The two element algebras every operator's semantics is written against,
// once, as a template: ConcreteAlgebra (exact rationals, for the interpreter
// and counterexample replay) and Z3Algebra (symbolic terms for the proof).
//
// Both expose the same member functions, so `template <class Alg>` operator
// code runs unchanged on either. Values of boolean tensors are 0/1 rationals
// concretely and Bool-sorted terms symbolically; integer tensors hold
// integral rationals / Int-sorted terms; real tensors rationals / Real terms.
// Every operation receives the DClass of its operands where the symbolic side
// needs it.
#pragma once

#include <z3++.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/rational.h"

namespace shardproof {

// Uninterpreted-function names: ops use their own name ("exp", "gelu"), a
// `map` fn uses "map:" + fn, so the two namespaces never meet.
std::string map_function_key(const std::string& fn);

// Concrete values for the uninterpreted functions (random ones in tests, the
// solver model's tables in counterexample replay).
class FunctionTable {
 public:
  virtual ~FunctionTable() = default;
  virtual Rational call(const std::string& fn, const std::vector<Rational>& args) = 0;
};

// A fixed, arbitrary function per name: a deterministic low-degree polynomial
// of the arguments whose coefficients come from the name. Good for tests.
class PseudoRandomFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>& args) override;
};

class ConcreteAlgebra {
 public:
  using Value = Rational;
  // `max_bits` (0: none) bounds the size of every exact value computed:
  // past it an operation throws EvalError. Random testing sets it, because
  // the pseudo-random functions square their arguments, so exact values
  // double in size at each transcendental op of a deep cone.
  explicit ConcreteAlgebra(FunctionTable& functions, size_t max_bits = 0)
      : functions_(functions), max_bits_(max_bits) {}

  Value constant(const Rational& r, DClass cls);  // Bool: r != 0 -> 1 else 0
  Value add(const Value& a, const Value& b);
  Value sub(const Value& a, const Value& b);
  Value mul(const Value& a, const Value& b);
  Value div(const Value& a, const Value& b);  // throws EvalError when b == 0
  Value neg(const Value& a);
  Value maximum(const Value& a, const Value& b);
  Value minimum(const Value& a, const Value& b);
  Value sum(const std::vector<Value>& terms);  // empty: 0
  // Comparisons give booleans.
  Value lt(const Value& a, const Value& b);
  Value le(const Value& a, const Value& b);
  Value gt(const Value& a, const Value& b);
  Value ge(const Value& a, const Value& b);
  Value eq(const Value& a, const Value& b);
  Value select(const Value& cond, const Value& a, const Value& b);
  // An uninterpreted function (real arguments, real result).
  Value call(const std::string& fn, const std::vector<Value>& args);
  // floor for real -> int, 0/1 for bool -> number, != 0 for number -> bool.
  Value cast(const Value& v, DClass from, DClass to);
  // candidates[index]; throws EvalError unless 0 <= index < candidates.size().
  Value pick(const Value& index, const std::vector<Value>& candidates);

 private:
  Value bounded(Value v) const;  // v, or EvalError when it exceeds max_bits_

  FunctionTable& functions_;
  size_t max_bits_;
};

// Bounds of Z3Algebra::normal_form: expanding products of long sums
// (scores over a layer norm's outputs) can take longer than any proof.
constexpr unsigned kNormalFormSteps = 2'000'000;
// A rewrite step can multiply two long sums, so steps do not bound the time:
// past this wall-clock limit the plain simplification is used instead (the
// result is still equal, only not normal; the solver then decides). Without
// it, a tied embedding's clipped gradient spent minutes normalising.
constexpr unsigned kNormalFormMilliseconds = 500;
// Terms of at most this many distinct nodes are normalised without that
// limit: Z3 arms a timer for every timed simplify, which cost 15 % of the
// soundness fuzzer's speed, and so small a term cannot grow past
// kNormalFormSteps' reach in time that matters.
constexpr size_t kUntimedNormalFormNodes = 64;
// A maximum's leaves are normalised only while small: a rewrite step can
// multiply two long sums, so steps do not bound the time, and a stage whose
// scores sit on a layer norm spent minutes normalising thousands of leaves.
constexpr size_t kLeafNormalFormNodes = 400;

// Symbolic algebra over one z3::context. Collects the side conditions that
// operations need: assumptions (nonzero denominators, valid input indices)
// and obligations (a computed index must be provably in range).
class Z3Algebra {
 public:
  using Value = z3::expr;
  explicit Z3Algebra(z3::context& ctx)
      : ctx_(ctx), normal_form_params_(ctx), timed_normal_form_params_(ctx) {
    for (z3::params* p : {&normal_form_params_, &timed_normal_form_params_}) {
      p->set("som", true);
      p->set("max_steps", kNormalFormSteps);
    }
    timed_normal_form_params_.set("timeout", kNormalFormMilliseconds);
  }

  z3::context& ctx() const { return ctx_; }
  // A fresh variable of the class's sort.
  Value variable(const std::string& name, DClass cls);
  // Index variables that come from a logical *input* tensor: their validity
  // as an index is assumed, not proven (plan-format-v1, "Meaning").
  void trust_as_index(const Value& v) { trusted_.insert(v.id()); }
  // From here on (the parallel graph), no index is trusted: the contract
  // assumes valid positions of what the *logical* graph indexes, so a rank
  // indexing its shard with global ids must be proven in range.
  void stop_trusting() { trusting_ = false; }

  Value constant(const Rational& r, DClass cls);
  Value add(const Value& a, const Value& b);
  Value sub(const Value& a, const Value& b);
  Value mul(const Value& a, const Value& b);
  Value div(const Value& a, const Value& b);  // records the assumption b != 0
  Value neg(const Value& a);
  Value maximum(const Value& a, const Value& b);
  Value minimum(const Value& a, const Value& b);
  // The maximum (minimum) of terms, in one canonical form: nested extremes
  // flattened, leaves deduplicated and ordered by term id. max is
  // associative, commutative and idempotent, so this is exact; and an
  // all-reduce of per-shard maxima then becomes the very term of the
  // logical row's maximum, which Z3 otherwise proves equal only by case
  // splits over every order of the leaves (seconds per vocab-parallel
  // cross-entropy stage).
  Value maximum_of(const std::vector<Value>& terms);
  Value minimum_of(const std::vector<Value>& terms);
  Value sum(const std::vector<Value>& terms);
  Value lt(const Value& a, const Value& b);
  Value le(const Value& a, const Value& b);
  Value gt(const Value& a, const Value& b);
  Value ge(const Value& a, const Value& b);
  Value eq(const Value& a, const Value& b);
  Value select(const Value& cond, const Value& a, const Value& b);
  Value call(const std::string& fn, const std::vector<Value>& args);
  Value cast(const Value& v, DClass from, DClass to);
  // An ite chain over candidates; the range condition on index becomes an
  // assumption when index is trusted (or a numeral in range), otherwise an
  // obligation that the proof must discharge.
  Value pick(const Value& index, const std::vector<Value>& candidates);

  // `e` in sum-of-monomials normal form, so that terms equal as polynomials
  // become one term (a difference that cancels becomes 0); past
  // kNormalFormSteps rewrites (or kNormalFormMilliseconds, for terms larger
  // than kUntimedNormalFormNodes) only simplified: equal, just not normal.
  Value normal_form(const Value& e) const;

  const std::vector<Value>& assumptions() const { return assumptions_; }
  const std::vector<Value>& obligations() const { return obligations_; }
  // The uninterpreted functions created so far, by name.
  const std::map<std::string, z3::func_decl>& functions() const { return functions_; }

 private:
  z3::context& ctx_;
  // Made once: simplify re-validates its parameters by name on every call.
  z3::params normal_form_params_;        // small terms
  z3::params timed_normal_form_params_;  // the others
  std::set<unsigned> trusted_;
  bool trusting_ = true;
  std::vector<Value> assumptions_;
  std::vector<Value> obligations_;
  std::map<std::string, z3::func_decl> functions_;
  // The leaves of each extreme built by extreme_of, by term id (max, min).
  std::unordered_map<unsigned, std::vector<Value>> extreme_leaves_[2];
  Value extreme_of(bool is_max, const std::vector<Value>& terms);
};

// The maximum of a non-empty list: the algebra's n-ary form where it has
// one (Z3Algebra's canonical form), otherwise a left fold.
template <class Alg>
typename Alg::Value maximum_of(Alg& alg, const std::vector<typename Alg::Value>& terms) {
  if constexpr (requires { alg.maximum_of(terms); }) {
    return alg.maximum_of(terms);
  } else {
    typename Alg::Value m = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) m = alg.maximum(m, terms[i]);
    return m;
  }
}

}  // namespace shardproof
