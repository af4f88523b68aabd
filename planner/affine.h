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

class Ix;

// An affine integer: a constant plus a multiple of each axis.
class Aff {
 public:
  Aff(int64_t c = 0) : c_(c) {}  // NOLINT: constants are written as ints
  Aff(const Ix& x);              // NOLINT
  static Aff axis(const std::string& name) {
    Aff a;
    a.k_[name] = 1;
    return a;
  }
  bool constant() const { return k_.empty(); }
  // The value of a constant; an internal error for a symbolic one.
  int64_t value() const;
  // The constant term, and the nonzero coefficient of each axis.
  int64_t offset() const { return c_; }
  const std::map<std::string, int64_t>& terms() const { return k_; }
  // As the compact form writes an expression: a JSON integer or "tp*64 + 64".
  nlohmann::json expr() const;
  // As an attribute: the integer, or {"expr": E}.
  nlohmann::json attr() const;
  // In a name: the digits, or a template hole "{dp*2 + cp}".
  std::string text() const;

  Aff operator+(const Aff& o) const;
  Aff operator-(const Aff& o) const { return *this + o * -1; }
  Aff operator*(int64_t f) const;
  bool operator==(const Aff& o) const { return c_ == o.c_ && k_ == o.k_; }

 private:
  int64_t c_;
  std::map<std::string, int64_t> k_;  // axis -> nonzero coefficient
};

// One coordinate: a constant, a mesh axis plus an offset ("mb-1"), or (the
// expert mesh's dp rank, dp*ep + ep) an affine combination of axes.
// Reading a symbolic coordinate as an int is an internal planner error: it
// means code that only the v1 plan may run was reached in compact mode.
class Ix {
 public:
  Ix(int v = 0) : a_(v) {}  // NOLINT: coordinates are written as ints
  static Ix axis(const std::string& name, int offset = 0) {
    return affine(Aff::axis(name) + offset);
  }
  static Ix affine(const Aff& a) {
    Ix x;
    x.a_ = a;
    return x;
  }
  bool symbolic() const { return !a_.constant(); }
  const Aff& aff() const { return a_; }
  operator int() const;  // NOLINT: the v1 plan computes with coordinates
  Ix& operator++() {
    a_ = a_ + 1;
    return *this;
  }
  // The coordinate in a name: "3", a template hole "{mb-1}", or "{dp*2 + ep}".
  std::string text() const;

 private:
  Aff a_;
};

}  // namespace shardproof::planner
