// The arithmetic of the compact plan form (shardproof-plan/1.1): affine
// integer expressions over named mesh coordinates, conditions that are
// conjunctions of affine comparisons, and name templates with {expr} holes.
// Kept affine on purpose: a later checker reasons about them per coordinate
// class without expanding the plan (docs/plan-format.md, "The compact form").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof::compact {

// Every axis a compact plan may name; device axes first, then the
// micro-batch instance axis. An axis is its index in this table. `etp`
// numbers the expert tensor-parallel rank of Megatron's expert mesh when
// it is below tp (docs/plan-format.md, "The mesh").
inline constexpr std::array<std::string_view, 7> kAxisNames = {"dp", "pp",  "tp", "cp",
                                                               "ep", "etp", "mb"};
inline constexpr int kAxisCount = static_cast<int>(kAxisNames.size());
inline constexpr int kMbAxis = kAxisCount - 1;
inline constexpr int kPpAxis = 1;
static_assert(kAxisNames[kPpAxis] == "pp");
// Constants and coefficients beyond this are surely mistakes; with
// coordinates below 2^20 every evaluation then fits in int64.
inline constexpr int64_t kMaxMagnitude = int64_t{1} << 40;
// A name or a bound is short; a longer text or deeper nesting is hostile
// (a recursive reader would run out of stack on it).
inline constexpr size_t kMaxExprLength = 4096;
inline constexpr int kMaxExprDepth = 64;

std::optional<int> axis_by_name(std::string_view name);

// One value per axis; axes the mesh does not declare stay 0.
using Coord = std::array<int64_t, kAxisCount>;
// Bit i set: axis i is mentioned.
using AxisMask = unsigned;

// constant + sum of coefficient * axis.
struct Affine {
  int64_t constant = 0;
  std::array<int64_t, kAxisCount> coef{};

  int64_t eval(const Coord& c) const {
    int64_t v = constant;
    for (int a = 0; a < kAxisCount; ++a) v += coef[a] * c[a];
    return v;
  }
  AxisMask mask() const;
  bool is_constant() const { return mask() == 0; }
};

// Why a text is not an expression, condition or template: rule
// "compact-expr" (syntax, not affine, overflow, too long or too deep) or
// "compact-axis".
struct ExprError {
  std::string rule;
  std::string message;
};

// `declared`: the axes the mesh declares; naming another is "compact-axis".
// Each throws ExprError.
Affine parse_affine(std::string_view text, AxisMask declared);

// lhs - rhs compared with 0.
struct Comparison {
  enum class Op { Eq, Lt, Le, Gt, Ge };
  Affine diff;
  Op op = Op::Eq;
  bool holds(const Coord& c) const;
};

// A conjunction; empty means "always".
struct Condition {
  std::vector<Comparison> all;
  bool holds(const Coord& c) const {
    for (const Comparison& k : all)
      if (!k.holds(c)) return false;
    return true;
  }
  AxisMask mask() const;
};
Condition parse_condition(std::string_view text, AxisMask declared);

// literal[0] {expr[0]} literal[1] ... literal[n].
struct Template {
  std::vector<std::string> literals;
  std::vector<Affine> exprs;

  void append(const Coord& c, std::string& out) const;
  std::string eval(const Coord& c) const {
    std::string s;
    append(c, s);
    return s;
  }
  AxisMask mask() const;
};
Template parse_template(std::string_view text, AxisMask declared);

}  // namespace shardproof::compact
