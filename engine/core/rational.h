// Exact rational numbers (GMP). Every attribute number in a plan and every
// concrete interpreter value is one of these: nothing goes through a double.
#pragma once

#include <gmpxx.h>

#include <optional>
#include <string>
#include <string_view>

namespace shardproof {

using Rational = mpq_class;

// Parses a JSON number's source text ("0.1", "-3", "1e-5", "2.5E+3") or an
// exact fraction string ("1/3", "-7/2") into an exact rational.
// Returns nullopt when the text is neither.
std::optional<Rational> parse_exact_number(std::string_view text);

// "3", "-1/3": canonical text of a rational.
std::string rational_to_string(const Rational& value);

// True when value is an integer that fits in int64_t.
bool rational_is_int64(const Rational& value);
int64_t rational_to_int64(const Rational& value);  // precondition: rational_is_int64

}  // namespace shardproof
