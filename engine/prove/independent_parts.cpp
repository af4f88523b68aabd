#include "engine/prove/independent_parts.h"

#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace shardproof {
namespace {

// Union-find over small integer ids.
struct Groups {
  std::vector<size_t> parent;
  explicit Groups(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  size_t find(size_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  }
  void join(size_t a, size_t b) { parent[find(a)] = find(b); }
};

}  // namespace

IndependentParts::IndependentParts(z3::context& ctx, const std::vector<z3::expr>& side)
    : ctx_(ctx), side_(side) {
  for (const z3::expr& s : side_) side_variables_.push_back(variables(s));
}

std::vector<unsigned> IndependentParts::variables(const z3::expr& e) {
  std::vector<unsigned> found;
  std::unordered_set<unsigned> seen;
  std::vector<z3::expr> work = {e};
  while (!work.empty()) {
    z3::expr x = work.back();
    work.pop_back();
    if (!seen.insert(x.id()).second || !x.is_app()) continue;
    if (x.num_args() == 0) {
      if (x.decl().decl_kind() == Z3_OP_UNINTERPRETED) found.push_back(x.id());
      continue;
    }
    for (unsigned i = 0; i < x.num_args(); ++i) work.push_back(x.arg(i));
  }
  return found;
}

std::vector<z3::expr> IndependentParts::split(const z3::expr& difference) {
  std::vector<z3::expr> terms;
  if (difference.is_app() && difference.decl().decl_kind() == Z3_OP_ADD)
    for (unsigned i = 0; i < difference.num_args(); ++i) terms.push_back(difference.arg(i));
  else
    terms.push_back(difference);
  if (terms.size() < 2) return {difference};

  // Terms are joined through the variables they share; terms with none (a
  // numeral) join the first term, whose group may need them to cancel.
  Groups groups(terms.size());
  std::unordered_map<unsigned, size_t> owner;  // variable -> a term holding it
  for (size_t t = 0; t < terms.size(); ++t) {
    const std::vector<unsigned> vars = variables(terms[t]);
    if (vars.empty()) groups.join(t, 0);
    for (unsigned v : vars) {
      auto [it, fresh] = owner.emplace(v, t);
      if (!fresh) groups.join(t, it->second);
    }
  }
  std::unordered_map<size_t, z3::expr_vector> sums;
  std::vector<size_t> order;
  for (size_t t = 0; t < terms.size(); ++t) {
    const size_t g = groups.find(t);
    auto [it, fresh] = sums.emplace(g, z3::expr_vector(ctx_));
    if (fresh) order.push_back(g);
    it->second.push_back(terms[t]);
  }
  std::vector<z3::expr> parts;
  for (size_t g : order) parts.push_back(z3::sum(sums.at(g)));
  return parts;
}

std::vector<z3::expr> IndependentParts::relevant(const z3::expr& query) {
  std::unordered_set<unsigned> reached;
  for (unsigned v : variables(query)) reached.insert(v);
  std::vector<char> taken(side_.size(), 0);
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t s = 0; s < side_.size(); ++s) {
      if (taken[s]) continue;
      bool touches = false;
      for (unsigned v : side_variables_[s]) touches = touches || reached.count(v);
      if (!touches) continue;
      taken[s] = 1;
      grew = true;
      for (unsigned v : side_variables_[s]) reached.insert(v);
    }
  }
  std::vector<z3::expr> out;
  for (size_t s = 0; s < side_.size(); ++s)
    if (taken[s]) out.push_back(side_[s]);
  return out;
}

}  // namespace shardproof
