// Coordinates and integers that may be symbolic. The transformer builder
// writes the v1 plan with concrete coordinates, and the compact plan
// (shardproof-plan/1.1) with the mesh axes themselves as coordinates: one
// pass then writes templates such as "dp{dp}.tp{tp}.pp3.mb{mb}.x" and
// slices such as [tp*64, tp*64 + 64] instead of one instance per rank.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace shardproof::planner {

// One coordinate: a constant, or a mesh axis plus an offset ("mb-1").
// Reading a symbolic coordinate as an int is an internal planner error: it
// means code that only the v1 plan may run was reached in compact mode.
class Ix {
 public:
  Ix(int v = 0) : off_(v) {}  // NOLINT: coordinates are written as ints
  static Ix axis(const std::string& name, int offset = 0) {
    Ix x(offset);
    x.axis_ = name;
    return x;
  }
  bool symbolic() const { return !axis_.empty(); }
  const std::string& axis_name() const { return axis_; }
  int offset() const { return off_; }
  operator int() const;  // NOLINT: the v1 plan computes with coordinates
  Ix& operator++() {
    ++off_;
    return *this;
  }
  // The coordinate in a name: "3", or a template hole "{mb-1}".
  std::string text() const;

 private:
  int off_;
  std::string axis_;
};

// An affine integer: a constant plus a multiple of each axis.
class Aff {
 public:
  Aff(int64_t c = 0) : c_(c) {}  // NOLINT: constants are written as ints
  Aff(const Ix& x);              // NOLINT
  bool constant() const { return k_.empty(); }
  // The value of a constant; an internal error for a symbolic one.
  int64_t value() const;
  // As the compact form writes an expression: a JSON integer or "tp*64 + 64".
  nlohmann::json expr() const;
  // As an attribute: the integer, or {"expr": E}.
  nlohmann::json attr() const;
  // In a name: the digits, or a template hole "{dp*2 + cp}".
  std::string text() const;

  Aff operator+(const Aff& o) const;
  Aff operator-(const Aff& o) const { return *this + o * -1; }
  Aff operator*(int64_t f) const;

 private:
  int64_t c_;
  std::map<std::string, int64_t> k_;  // axis -> nonzero coefficient
};

}  // namespace shardproof::planner
