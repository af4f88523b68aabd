#include "engine/ops/modular_algebra.h"

#include <numeric>

#include <xxhash.h>

#include "engine/core/tensor.h"

namespace shardproof {
namespace {

using V = ModularAlgebra::Value;
constexpr uint64_t P = ModularAlgebra::kPrime;

V reduce(unsigned __int128 x) {
  // 2^61 = 1 (mod p): fold the high bits down twice.
  uint64_t lo = static_cast<uint64_t>(x & P);
  uint64_t hi = static_cast<uint64_t>(x >> 61);
  uint64_t r = lo + hi;
  r = (r & P) + (r >> 61);
  return r >= P ? r - P : r;
}

V mod_of(const mpz_class& z) {
  mpz_class r;
  mpz_fdiv_r_ui(r.get_mpz_t(), z.get_mpz_t(), P);
  return r.get_ui();
}

V power(V base, uint64_t e) {
  V result = 1;
  while (e) {
    if (e & 1) result = reduce(static_cast<unsigned __int128>(result) * base);
    base = reduce(static_cast<unsigned __int128>(base) * base);
    e >>= 1;
  }
  return result;
}

V boolean(bool b) {
  return b ? 1 : 0;
}

}  // namespace

V ModularAlgebra::of(const Rational& r) {
  const V den = mod_of(r.get_den());
  if (den == 0) throw EvalError("a constant's denominator is a multiple of the field's prime");
  return reduce(static_cast<unsigned __int128>(mod_of(r.get_num())) * inverse(den));
}

int64_t ModularAlgebra::signed_value(V v) {
  return v > P / 2 ? static_cast<int64_t>(v) - static_cast<int64_t>(P) : static_cast<int64_t>(v);
}

V ModularAlgebra::inverse(V v) {
  return power(v, P - 2);
}

bool ModularAlgebra::small_rational(V v, int64_t& num, int64_t& den) {
  // Extended Euclid on (p, v), stopped at the first remainder below 2^24:
  // 2 * 2^24 * 2^24 < p makes the answer unique, and about one random
  // residue in 7000 passes for a small rational.
  const int64_t bound = int64_t{1} << 24;
  __int128 r0 = P, r1 = v, t0 = 0, t1 = 1;
  while (r1 >= bound) {
    const __int128 q = r0 / r1;
    const __int128 r2 = r0 - q * r1, t2 = t0 - q * t1;
    r0 = r1, r1 = r2, t0 = t1, t1 = t2;
  }
  if (t1 == 0 || t1 >= bound || t1 <= -bound) return false;
  num = static_cast<int64_t>(t1 < 0 ? -r1 : r1);
  den = static_cast<int64_t>(t1 < 0 ? -t1 : t1);
  const int64_t g = std::gcd(num < 0 ? -num : num, den);
  if (g > 1) num /= g, den /= g;
  return true;
}

V ModularAlgebra::constant(const Rational& r, DClass cls) {
  if (cls == DClass::Bool) return boolean(r != 0);
  return of(r);
}
V ModularAlgebra::add(const V& a, const V& b) const {
  const V s = a + b;
  return s >= P ? s - P : s;
}
V ModularAlgebra::sub(const V& a, const V& b) const {
  return a >= b ? a - b : a + P - b;
}
V ModularAlgebra::mul(const V& a, const V& b) const {
  return reduce(static_cast<unsigned __int128>(a) * b);
}
V ModularAlgebra::div(const V& a, const V& b) const {
  if (b == 0) throw EvalError("division by zero");
  return mul(a, inverse(b));
}
V ModularAlgebra::neg(const V& a) const {
  return a == 0 ? 0 : P - a;
}
int ModularAlgebra::compare(V a, V b) const {
  if (a == b) return 0;
  int64_t an = 0, ad = 1, bn = 0, bd = 1;
  const bool a_small = small_rational(a, an, ad), b_small = small_rational(b, bn, bd);
  if (a_small && b_small) {
    const __int128 l = static_cast<__int128>(an) * bd, r = static_cast<__int128>(bn) * ad;
    return l < r ? -1 : 1;
  }
  // A residue outside the small rationals sits beyond them (|signed| >= 2^24,
  // since small integers are small rationals) at its signed representative,
  // negated when mirrored.
  const int sign = mirrored_ ? -1 : 1;
  const __int128 ka = a_small ? 0 : sign * static_cast<__int128>(signed_value(a));
  const __int128 kb = b_small ? 0 : sign * static_cast<__int128>(signed_value(b));
  if (a_small) return kb > 0 ? -1 : 1;
  if (b_small) return ka > 0 ? 1 : -1;
  return ka < kb ? -1 : 1;
}

V ModularAlgebra::maximum(const V& a, const V& b) const {
  return compare(a, b) >= 0 ? a : b;
}
V ModularAlgebra::minimum(const V& a, const V& b) const {
  return compare(a, b) <= 0 ? a : b;
}
V ModularAlgebra::sum(const std::vector<V>& terms) const {
  V s = 0;
  for (V t : terms) s = add(s, t);
  return s;
}
V ModularAlgebra::lt(const V& a, const V& b) const {
  return boolean(compare(a, b) < 0);
}
V ModularAlgebra::le(const V& a, const V& b) const {
  return boolean(compare(a, b) <= 0);
}
V ModularAlgebra::gt(const V& a, const V& b) const {
  return boolean(compare(a, b) > 0);
}
V ModularAlgebra::ge(const V& a, const V& b) const {
  return boolean(compare(a, b) >= 0);
}
V ModularAlgebra::eq(const V& a, const V& b) const {
  return boolean(a == b);
}
V ModularAlgebra::select(const V& cond, const V& a, const V& b) const {
  return cond ? a : b;
}

V ModularAlgebra::call(const std::string& fn, const std::vector<V>& args) const {
  if (functions_) return functions_(fn, args) % P;
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset_withSeed(state, seed_);
  XXH3_64bits_update(state, fn.data(), fn.size() + 1);  // with the NUL: "ab"+x != "a"+"b"x
  XXH3_64bits_update(state, args.data(), args.size() * sizeof(V));
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return h % P;
}

V ModularAlgebra::cast(const V& v, DClass from, DClass to) const {
  if (from == to) return v;
  if (to == DClass::Bool) return boolean(v != 0);
  if (to == DClass::Int && from == DClass::Real) {
    int64_t num = 0, den = 1;
    if (!small_rational(v, num, den)) return v;
    const int64_t floor = num >= 0 ? num / den : -((-num + den - 1) / den);
    return of(Rational(static_cast<long>(floor)));
  }
  return v;
}

V ModularAlgebra::pick(const V& index, const std::vector<V>& candidates) const {
  const int64_t i = signed_value(index);
  if (i < 0 || i >= static_cast<int64_t>(candidates.size()))
    throw EvalError("index " + std::to_string(i) + " out of range [0, " +
                    std::to_string(candidates.size()) + ")");
  return candidates[static_cast<size_t>(i)];
}

}  // namespace shardproof
