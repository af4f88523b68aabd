#include "engine/prove/sweep.h"

#include <unordered_map>
#include <vector>

#include <xxhash.h>

#include "engine/ops/modular_algebra.h"
#include "engine/prove/stage_testing.h"

namespace shardproof {
namespace {

using M = ModularAlgebra;

uint64_t leaf_hash(const std::string& name) {
  return XXH3_64bits_withSeed(name.data(), name.size(), 0x5eedc0de);
}

// The stage on one random assignment modulo p; nullopt outside its domain.
std::optional<StageValues<M>> residues(const Stage& stage) {
  M alg(0x5eed);
  auto leaf = [&](const std::string& name, DClass cls) -> uint64_t {
    const uint64_t h = leaf_hash(name);
    if (cls == DClass::Int) {
      const IntRange r = int_range(stage, name);
      return M::of(Rational(static_cast<long>(r.lo + static_cast<int64_t>(h % (r.hi - r.lo)))));
    }
    if (cls == DClass::Bool) return h % 2;
    return h % M::kPrime;
  };
  try {
    return evaluate_stage<M>(alg, stage, leaf);
  } catch (const EvalError&) {
    return std::nullopt;
  }
}

// A residue that tells values apart: not a small rational (0, 1, -10000:
// constants and masks match everything).
bool informative(uint64_t v) {
  int64_t num = 0, den = 0;
  return !M::small_rational(v, num, den);
}

}  // namespace

void Substitution::add(const z3::expr& term, const z3::expr& replacement) {
  pairs_.insert_or_assign(term.id(), std::make_pair(term, replacement));
}

z3::expr Substitution::apply(const z3::expr& e) {
  if (pairs_.empty()) return e;
  // Post-order over the DAG without recursion (terms are deep).
  std::vector<std::pair<z3::expr, bool>> todo = {{e, false}};
  auto known = [&](const z3::expr& t) -> const z3::expr* {
    if (auto p = pairs_.find(t.id()); p != pairs_.end()) return &p->second.second;
    if (auto d = done_.find(t.id()); d != done_.end()) return &d->second.second;
    return nullptr;
  };
  while (!todo.empty()) {
    auto [t, expanded] = todo.back();
    todo.pop_back();
    if (known(t)) continue;
    if (!t.is_app() || t.num_args() == 0) {
      done_.insert_or_assign(t.id(), std::make_pair(t, t));
      continue;
    }
    if (!expanded) {
      todo.push_back({t, true});
      for (unsigned i = 0; i < t.num_args(); ++i)
        if (!known(t.arg(i))) todo.push_back({t.arg(i), false});
      continue;
    }
    std::vector<Z3_ast> args(t.num_args());
    bool changed = false;
    for (unsigned i = 0; i < t.num_args(); ++i) {
      const z3::expr a = t.arg(i);
      args[i] = *known(a);
      changed |= args[i] != static_cast<Z3_ast>(a);
    }
    z3::expr r = t;
    if (changed) {
      r = z3::expr(ctx_, Z3_update_term(ctx_, t, t.num_args(), args.data()));
      ctx_.check_error();
    }
    done_.insert_or_assign(t.id(), std::make_pair(t, r));
  }
  return *known(e);
}

Substitution sweep_stage(const Stage& stage, const StageValues<Z3Algebra>& symbolic,
                         const Z3Algebra& alg,
                         const std::function<bool(const z3::expr& difference)>& proves_zero,
                         std::chrono::steady_clock::time_point deadline) {
  Substitution sub(alg.ctx());
  const std::optional<StageValues<M>> values = residues(stage);
  if (!values) return sub;

  // Residue -> a logical element's term (the first one computed).
  std::unordered_map<uint64_t, z3::expr> logical;
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (st.parallel || dclass_of(st.dtype) != DClass::Real || !(*values)[t] || !symbolic[t])
      continue;
    const std::vector<uint64_t>& v = (*values)[t]->data;
    for (size_t i = 0; i < v.size(); ++i)
      if (informative(v[i])) logical.emplace(v[i], symbolic[t]->data[i]);
  }
  for (const StageOp& op : stage.ops) {
    if (!op.parallel) continue;
    for (int out : op.out) {
      const size_t t = static_cast<size_t>(out);
      if (dclass_of(stage.tensors[t].dtype) != DClass::Real || !(*values)[t] || !symbolic[t])
        continue;
      const std::vector<uint64_t>& v = (*values)[t]->data;
      for (size_t i = 0; i < v.size(); ++i) {
        auto match = logical.find(v[i]);
        if (match == logical.end()) continue;
        const z3::expr& term = symbolic[t]->data[i];
        if (z3::eq(term, match->second)) continue;
        if (std::chrono::steady_clock::now() > deadline) return sub;
        const z3::expr difference = alg.normal_form(sub.apply(term) - match->second);
        if (is_zero_numeral(difference) || (!difference.is_numeral() && proves_zero(difference))) {
          sub.add(term, match->second);
        }
      }
    }
  }
  return sub;
}

}  // namespace shardproof
