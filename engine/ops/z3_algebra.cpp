// Symbolic evaluation of operator semantics as Z3 terms over the reals, with
// the side conditions (assumptions, obligations) the operations need.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/ops/algebra.h"

namespace shardproof {

using V = Z3Algebra::Value;

namespace {

z3::sort sort_of(z3::context& ctx, DClass cls) {
  switch (cls) {
    case DClass::Real:
      return ctx.real_sort();
    case DClass::Int:
      return ctx.int_sort();
    case DClass::Bool:
      return ctx.bool_sort();
  }
  return ctx.real_sort();
}

// Uninterpreted functions are declared over the reals: integer arguments
// are lifted, so one declaration per name serves every call.
V as_real(const V& v) {
  if (v.is_real()) return v;
  if (v.is_int()) return z3::to_real(v);
  if (v.is_bool()) return z3::ite(v, v.ctx().real_val(1), v.ctx().real_val(0));
  throw std::invalid_argument("uninterpreted function argument of unexpected sort");
}

}  // namespace

V Z3Algebra::variable(const std::string& name, DClass cls) {
  return ctx_.constant(name.c_str(), sort_of(ctx_, cls));
}

V Z3Algebra::constant(const Rational& r, DClass cls) {
  switch (cls) {
    case DClass::Bool:
      return ctx_.bool_val(r != 0);
    case DClass::Int: {
      if (r.get_den() != 1)
        throw std::invalid_argument("integer constant " + rational_to_string(r));
      return ctx_.int_val(r.get_num().get_str().c_str());
    }
    case DClass::Real:
      return ctx_.real_val(rational_to_string(r).c_str());
  }
  return ctx_.real_val(0);
}

V Z3Algebra::add(const V& a, const V& b) {
  return a + b;
}
V Z3Algebra::sub(const V& a, const V& b) {
  return a - b;
}
// ite(c, p, q) with numeral branches: an indicator (a cast boolean, a mask).
static bool is_numeral_ite(const V& v) {
  return v.is_app() && v.decl().decl_kind() == Z3_OP_ITE && v.arg(1).is_numeral() &&
         v.arg(2).is_numeral();
}

V Z3Algebra::mul(const V& a, const V& b) {
  // x * ite(c, p, q) is ite(c, p*x, q*x): linear where the product is not,
  // so a one-hot matmul or a masked value keeps Z3 in linear arithmetic
  // instead of nonlinear real arithmetic, where it gives up.
  if (is_numeral_ite(b) && !a.is_numeral()) return z3::ite(b.arg(0), a * b.arg(1), a * b.arg(2));
  if (is_numeral_ite(a) && !b.is_numeral()) return z3::ite(a.arg(0), a.arg(1) * b, a.arg(2) * b);
  return a * b;
}

V Z3Algebra::div(const V& a, const V& b) {
  // A nonzero numeral needs no assumption; anything else may be zero.
  bool nonzero_numeral = false;
  if (b.is_numeral()) {
    std::string text = Z3_get_numeral_string(ctx_, b);
    nonzero_numeral = text != "0" && text != "0.0";
  }
  if (!nonzero_numeral) assumptions_.push_back(b != ctx_.real_val(0));
  // a / a is 1 under the assumption just recorded; left as a quotient, Z3
  // needs nonlinear reasoning to see it (seconds where this takes nothing).
  if (a.is_real() && z3::eq(a, b)) return ctx_.real_val(1);
  return a / b;
}

V Z3Algebra::neg(const V& a) {
  return -a;
}
V Z3Algebra::maximum(const V& a, const V& b) {
  return extreme_of(true, {a, b});
}
V Z3Algebra::minimum(const V& a, const V& b) {
  return extreme_of(false, {a, b});
}
V Z3Algebra::maximum_of(const std::vector<V>& terms) {
  return extreme_of(true, terms);
}
V Z3Algebra::minimum_of(const std::vector<V>& terms) {
  return extreme_of(false, terms);
}

namespace {

// Whether `e`'s DAG has more than `limit` distinct nodes (stops counting there).
bool larger_than(const z3::expr& e, size_t limit) {
  std::unordered_set<unsigned> seen;
  std::vector<z3::expr> todo = {e};
  while (!todo.empty()) {
    z3::expr t = todo.back();
    todo.pop_back();
    if (!seen.insert(t.id()).second) continue;
    if (seen.size() > limit) return true;
    if (t.is_app())
      for (unsigned i = 0; i < t.num_args(); ++i) todo.push_back(t.arg(i));
  }
  return false;
}

}  // namespace

V Z3Algebra::normal_form(const V& e) const {
  try {
    return e.simplify(larger_than(e, kUntimedNormalFormNodes) ? timed_normal_form_params_
                                                              : normal_form_params_);
  } catch (const z3::exception&) {  // "max. steps exceeded", or its time limit
    return e.simplify();
  }
}

V Z3Algebra::extreme_of(bool is_max, const std::vector<V>& terms) {
  std::unordered_map<unsigned, std::vector<V>>& known = extreme_leaves_[is_max ? 0 : 1];
  // Leaves in sum-of-monomials form, so equal leaves are one term and sort
  // the same on both sides of a claim: sorting raw terms by id followed
  // creation order, and a shared context made that differ between the
  // logical and the parallel maximum.
  std::vector<V> leaves;
  for (const V& t : terms) {
    auto it = known.find(t.id());
    if (it == known.end()) {
      leaves.push_back(larger_than(t, kLeafNormalFormNodes) ? t.simplify() : normal_form(t));
    } else {
      leaves.insert(leaves.end(), it->second.begin(), it->second.end());
    }
  }
  std::sort(leaves.begin(), leaves.end(), [](const V& x, const V& y) { return x.id() < y.id(); });
  leaves.erase(std::unique(leaves.begin(), leaves.end(),
                           [](const V& x, const V& y) { return x.id() == y.id(); }),
               leaves.end());
  V m = leaves[0];
  for (size_t i = 1; i < leaves.size(); ++i)
    m = is_max ? z3::ite(m >= leaves[i], m, leaves[i]) : z3::ite(m <= leaves[i], m, leaves[i]);
  if (leaves.size() > 1) known.emplace(m.id(), std::move(leaves));
  return m;
}

V Z3Algebra::sum(const std::vector<V>& terms) {
  if (terms.empty()) return ctx_.real_val(0);
  if (terms.size() == 1) return terms[0];
  z3::expr_vector v(ctx_);
  for (const V& t : terms) v.push_back(t);
  return z3::sum(v);
}

V Z3Algebra::lt(const V& a, const V& b) {
  return a < b;
}
V Z3Algebra::le(const V& a, const V& b) {
  return a <= b;
}
V Z3Algebra::gt(const V& a, const V& b) {
  return a > b;
}
V Z3Algebra::ge(const V& a, const V& b) {
  return a >= b;
}
V Z3Algebra::eq(const V& a, const V& b) {
  return a == b;
}
V Z3Algebra::select(const V& cond, const V& a, const V& b) {
  return z3::ite(cond, a, b);
}

V Z3Algebra::call(const std::string& fn, const std::vector<V>& args) {
  auto it = functions_.find(fn);
  if (it == functions_.end()) {
    z3::sort_vector domain(ctx_);
    for (size_t i = 0; i < args.size(); ++i) domain.push_back(ctx_.real_sort());
    std::string uf_name = "uf!" + fn;
    z3::func_decl decl = ctx_.function(uf_name.c_str(), domain, ctx_.real_sort());
    it = functions_.emplace(fn, decl).first;
  } else if (it->second.arity() != args.size()) {
    // The contract makes one fn with two arities an invalid plan.
    throw std::invalid_argument("function '" + fn + "' used with " + std::to_string(args.size()) +
                                " arguments and with " + std::to_string(it->second.arity()));
  }
  z3::expr_vector actual(ctx_);
  for (const V& a : args) actual.push_back(as_real(a));
  return it->second(actual);
}

V Z3Algebra::cast(const V& v, DClass from, DClass to) {
  if (from == to) return v;
  if (to == DClass::Bool) {
    return from == DClass::Int ? v != ctx_.int_val(0) : v != ctx_.real_val(0);
  }
  if (from == DClass::Bool) {
    return to == DClass::Int ? z3::ite(v, ctx_.int_val(1), ctx_.int_val(0))
                             : z3::ite(v, ctx_.real_val(1), ctx_.real_val(0));
  }
  if (to == DClass::Int) {  // real -> int: floor
    Z3_ast r = Z3_mk_real2int(ctx_, v);
    ctx_.check_error();
    return V(ctx_, r);
  }
  return z3::to_real(v);  // int -> real
}

V Z3Algebra::pick(const V& index, const std::vector<V>& candidates) {
  if (candidates.empty()) throw std::invalid_argument("pick from no candidates");
  const int64_t n = static_cast<int64_t>(candidates.size());
  int64_t literal = 0;
  if (index.is_numeral() && index.is_numeral_i64(literal)) {
    if (literal >= 0 && literal < n) return candidates[literal];
    // A computed index that is certainly out of range: the proof must fail.
    obligations_.push_back(ctx_.bool_val(false));
    return candidates[0];
  }
  z3::expr in_range = index >= ctx_.int_val(0) && index < ctx_.int_val(n);
  if (trusting_ && trusted_.count(index.id()))
    assumptions_.push_back(in_range);
  else
    obligations_.push_back(in_range);
  V result = candidates[n - 1];
  for (int64_t i = n - 2; i >= 0; --i)
    result = z3::ite(index == ctx_.int_val(i), candidates[i], result);
  return result;
}

}  // namespace shardproof
