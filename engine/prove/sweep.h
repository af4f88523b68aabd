// Sweeping a stage: proven equalities between parallel and logical element
// terms, substituted into the claims the solver could not take whole.
//
// A vocabulary-parallel softmax computes each row's maximum as the maximum
// of the shards' maxima (an all-reduce), the logical one over the whole
// row: two different ite chains with the same value. Every later term
// (exp(x - max), the row sums, the quotient) differs syntactically, so the
// solver must rediscover max = max' under every exp and division at once,
// in nonlinear arithmetic, and gives up. Equivalence checkers of circuits
// meet the same wall and "sweep": prove the equal internal points first,
// in order, and merge them. Here: one random evaluation of the stage modulo
// a prime (ops/modular_algebra.h, functions a keyed hash) proposes pairs of
// a parallel element and a logical element with the same residue; in the
// stage's op order each pair, with the pairs proven before it substituted,
// is proven equal under the stage's assumptions (a small query: max = max'
// is linear) and then substituted itself. Afterwards the quotient's two
// sides are the same term.
//
// Sound: a pair is substituted only after its equality is proven under the
// stage's assumptions, and a claim query with equal terms substituted has
// the same models as without. Residues only propose; a coincidence costs a
// failed query.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>

#include <z3++.h>

#include "engine/ops/algebra.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_eval.h"

namespace shardproof {

// Zero exactly when `e` is the numeral 0.
inline bool is_zero_numeral(const z3::expr& e) {
  return e.is_numeral() && std::string(Z3_get_numeral_string(e.ctx(), e)) == "0";
}

// Proven pairs (term -> an equal term), applied to later terms. Results
// are memoised by subterm across calls: a sweep applies the pairs so far to
// every element in turn (Z3_substitute rebuilt a map of every pair on each
// call: quadratic, over half of a GPT stage's time). A subterm cached before
// a pair inside it was proven keeps the older, equal form: still sound (each
// pair is an equality under the stage's assumptions), only less merged; the
// sweep proves pairs in op order, so that is rare.
class Substitution {
 public:
  explicit Substitution(z3::context& ctx) : ctx_(ctx) {}
  bool empty() const { return pairs_.empty(); }
  void add(const z3::expr& term, const z3::expr& replacement);
  z3::expr apply(const z3::expr& e);

 private:
  z3::context& ctx_;
  // By Z3 id; each entry keeps its key term alive, so ids are not reused.
  std::unordered_map<unsigned, std::pair<z3::expr, z3::expr>> pairs_, done_;
};

// `proves_zero(d)` answers whether d == 0 holds under the stage's
// assumptions (a solver query); the sweep stops at `deadline`.
Substitution sweep_stage(const Stage& stage, const StageValues<Z3Algebra>& symbolic,
                         const Z3Algebra& alg,
                         const std::function<bool(const z3::expr& difference)>& proves_zero,
                         std::chrono::steady_clock::time_point deadline);

}  // namespace shardproof
