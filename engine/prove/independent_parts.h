// Splitting a claim query into parts that share no variable.
//
// An element's difference is often a sum of terms over disjoint inputs: a
// data-parallel gradient sums one term per token, a one-hot embedding
// gradient one indicator term per token. Z3 decides "this sum is nonzero"
// by case splits across all its terms at once, and gives up on 16 tokens
// where each token alone is instant. Two facts make smaller queries sound:
//
//  - If every group of terms that shares no variable with the others sums
//    to zero (under the assumptions), the whole sum does. (Only sufficient:
//    a failing group sends the caller back to the whole query.)
//  - A query is unsatisfiable with all assumptions if it is with only those
//    connected to it by shared variables (fewer constraints, more models).
//    A model found with fewer is re-checked against all of them before it
//    is believed; that the assumptions can hold at all is the prover's own
//    separate query.
//
// Variables are the 0-ary uninterpreted constants (a stage's input
// elements); uninterpreted functions connect nothing by their name alone.
#pragma once

#include <vector>

#include <z3++.h>

namespace shardproof {

class IndependentParts {
 public:
  // `side` holds the assumptions and obligations a query may need.
  IndependentParts(z3::context& ctx, const std::vector<z3::expr>& side);

  // The terms of `difference` (a sum, or one term) in groups that share no
  // variable, each group summed; one entry when nothing splits.
  std::vector<z3::expr> split(const z3::expr& difference);

  // The side conditions connected to `query` through shared variables,
  // transitively.
  std::vector<z3::expr> relevant(const z3::expr& query);

 private:
  std::vector<unsigned> variables(const z3::expr& e);

  z3::context& ctx_;
  std::vector<z3::expr> side_;
  std::vector<std::vector<unsigned>> side_variables_;  // per side condition
};

}  // namespace shardproof
