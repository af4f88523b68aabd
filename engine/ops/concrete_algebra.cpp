// Exact rational evaluation of operator semantics, and the pseudo-random
// function table that stands in for uninterpreted functions in tests.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"

namespace shardproof {

std::string map_function_key(const std::string& fn) {
  return "map:" + fn;
}

namespace {

// FNV-1a: stable across platforms and runs, unlike std::hash.
uint64_t fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// A small nonzero rational coefficient, so that every term matters.
Rational coefficient(const std::string& fn, uint64_t which) {
  uint64_t h = fnv1a(fn, which + 1);
  int64_t num = static_cast<int64_t>(h % 9) + 1;         // 1..9
  int64_t den = static_cast<int64_t>((h >> 8) % 4) + 1;  // 1..4
  if ((h >> 16) & 1) num = -num;
  Rational r(num, den);
  r.canonicalize();
  return r;
}

}  // namespace

// f(a) = c0 + sum_i (c1_i a_i + c2_i a_i^2) + cx * a_0 * a_1 (arity >= 2):
// depends on every argument, non-linear (so no accidental identities like
// f(a+b) = f(a)f(b)), and a different polynomial for every name.
Rational PseudoRandomFunctions::call(const std::string& fn, const std::vector<Rational>& args) {
  Rational result = coefficient(fn, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    result += coefficient(fn, 1 + 2 * i) * args[i];
    result += coefficient(fn, 2 + 2 * i) * args[i] * args[i];
  }
  if (args.size() >= 2) result += coefficient(fn, 1000) * args[0] * args[1];
  result.canonicalize();
  return result;
}

using V = ConcreteAlgebra::Value;

V ConcreteAlgebra::constant(const Rational& r, DClass cls) {
  if (cls == DClass::Bool) return V(r != 0 ? 1 : 0);
  V v = r;
  v.canonicalize();  // GMP arithmetic requires canonical operands
  return v;
}
V ConcreteAlgebra::bounded(V v) const {
  if (max_bits_ > 0 &&
      mpz_sizeinbase(v.get_num_mpz_t(), 2) + mpz_sizeinbase(v.get_den_mpz_t(), 2) > max_bits_)
    throw EvalError("exact values grew past " + std::to_string(max_bits_) + " bits");
  return v;
}
V ConcreteAlgebra::add(const V& a, const V& b) {
  return bounded(V(a + b));
}
V ConcreteAlgebra::sub(const V& a, const V& b) {
  return bounded(V(a - b));
}
V ConcreteAlgebra::mul(const V& a, const V& b) {
  return bounded(V(a * b));
}
V ConcreteAlgebra::div(const V& a, const V& b) {
  if (b == 0) throw EvalError("division by zero");
  return bounded(V(a / b));
}
V ConcreteAlgebra::neg(const V& a) {
  return V(-a);
}
V ConcreteAlgebra::maximum(const V& a, const V& b) {
  return a >= b ? a : b;
}
V ConcreteAlgebra::minimum(const V& a, const V& b) {
  return a <= b ? a : b;
}
V ConcreteAlgebra::sum(const std::vector<V>& terms) {
  V total(0);
  for (const V& t : terms) total += t;
  return bounded(std::move(total));
}
V ConcreteAlgebra::lt(const V& a, const V& b) {
  return V(a < b ? 1 : 0);
}
V ConcreteAlgebra::le(const V& a, const V& b) {
  return V(a <= b ? 1 : 0);
}
V ConcreteAlgebra::gt(const V& a, const V& b) {
  return V(a > b ? 1 : 0);
}
V ConcreteAlgebra::ge(const V& a, const V& b) {
  return V(a >= b ? 1 : 0);
}
V ConcreteAlgebra::eq(const V& a, const V& b) {
  return V(a == b ? 1 : 0);
}
V ConcreteAlgebra::select(const V& cond, const V& a, const V& b) {
  return cond != 0 ? a : b;
}
V ConcreteAlgebra::call(const std::string& fn, const std::vector<V>& args) {
  return bounded(functions_.call(fn, args));
}

V ConcreteAlgebra::cast(const V& v, DClass from, DClass to) {
  if (from == to) return v;
  if (to == DClass::Bool) return V(v != 0 ? 1 : 0);
  if (to == DClass::Int && from == DClass::Real) {
    // Floor: GMP's fdiv rounds toward negative infinity.
    mpz_class q;
    mpz_fdiv_q(q.get_mpz_t(), v.get_num_mpz_t(), v.get_den_mpz_t());
    return V(q);
  }
  return v;  // int -> real, bool -> number: already 0/1 or integral
}

V ConcreteAlgebra::pick(const V& index, const std::vector<V>& candidates) {
  if (index.get_den() != 1 || index < 0 || index >= static_cast<long>(candidates.size()))
    throw EvalError("index " + rational_to_string(index) + " out of range [0, " +
                    std::to_string(candidates.size()) + ")");
  return candidates[index.get_num().get_si()];
}

}  // namespace shardproof
