#include "engine/core/rational.h"

#include <cctype>
#include <limits>

namespace shardproof {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Parses an optionally signed decimal integer into an mpz.
bool parse_integer(std::string_view s, mpz_class& out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (!all_digits(s)) return false;
  out = mpz_class(std::string(s), 10);
  if (negative) out = -out;
  return true;
}

std::optional<Rational> parse_fraction(std::string_view text) {
  size_t slash = text.find('/');
  mpz_class num, den;
  if (!parse_integer(text.substr(0, slash), num)) return std::nullopt;
  std::string_view den_text = text.substr(slash + 1);
  if (!den_text.empty() && den_text[0] == '+') return std::nullopt;
  if (!parse_integer(den_text, den) || den == 0) return std::nullopt;
  Rational r(num, den);
  r.canonicalize();
  return r;
}

}  // namespace

std::optional<Rational> parse_exact_number(std::string_view text) {
  if (text.find('/') != std::string_view::npos) return parse_fraction(text);
  bool negative = false;
  std::string_view s = text;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  size_t exp_pos = s.find_first_of("eE");
  std::string_view mantissa = s.substr(0, exp_pos);
  long exponent = 0;
  if (exp_pos != std::string_view::npos) {
    std::string_view exp_text = s.substr(exp_pos + 1);
    bool exp_negative = false;
    if (!exp_text.empty() && (exp_text[0] == '-' || exp_text[0] == '+')) {
      exp_negative = exp_text[0] == '-';
      exp_text.remove_prefix(1);
    }
    if (!all_digits(exp_text) || exp_text.size() > 6) return std::nullopt;
    exponent = std::stol(std::string(exp_text));
    if (exp_negative) exponent = -exponent;
  }
  size_t dot = mantissa.find('.');
  std::string digits(mantissa.substr(0, dot));
  if (dot != std::string_view::npos) {
    std::string_view frac = mantissa.substr(dot + 1);
    if (!all_digits(frac)) return std::nullopt;
    digits += frac;
    exponent -= static_cast<long>(frac.size());
  }
  if (!all_digits(digits)) return std::nullopt;
  mpz_class num(digits, 10);
  mpz_class scale;
  mpz_ui_pow_ui(scale.get_mpz_t(), 10,
                static_cast<unsigned long>(exponent < 0 ? -exponent : exponent));
  Rational r = exponent < 0 ? Rational(num, scale) : Rational(num * scale, 1);
  r.canonicalize();
  if (negative) r = -r;
  return r;
}

std::string rational_to_string(const Rational& value) {
  return value.get_str();
}

bool rational_is_int64(const Rational& value) {
  if (value.get_den() != 1) return false;
  static_assert(sizeof(long) == sizeof(int64_t), "mpz's long is the plan's int64");
  return value.get_num().fits_slong_p();
}

int64_t rational_to_int64(const Rational& value) {
  return value.get_num().get_si();
}

}  // namespace shardproof
