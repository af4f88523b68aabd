#include "planner/affine.h"

#include <stdexcept>

namespace shardproof::planner {

Ix::operator int() const {
  if (symbolic())
    throw std::logic_error("planner internal error: symbolic coordinate " + text() +
                           " read as an integer");
  return int(a_.value());
}

std::string Ix::text() const {
  if (!symbolic()) return std::to_string(a_.value());
  // One axis plus an offset keeps its short form ("{mb-1}").
  const auto& k = a_.terms();
  if (k.size() != 1 || k.begin()->second != 1) return a_.text();
  const std::string& axis = k.begin()->first;
  const int64_t off = a_.offset();
  if (off == 0) return "{" + axis + "}";
  return "{" + axis + (off > 0 ? "+" : "-") + std::to_string(off > 0 ? off : -off) + "}";
}

Aff::Aff(const Ix& x) : Aff(x.aff()) {}

int64_t Aff::value() const {
  if (!constant()) throw std::logic_error("planner internal error: symbolic " + expr().dump());
  return c_;
}

nlohmann::json Aff::expr() const {
  if (constant()) return c_;
  std::string s;
  auto term = [&](int64_t v, const std::string& body) {
    if (s.empty()) {
      s = (v < 0 ? "-" : "") + body;
    } else {
      s += v < 0 ? " - " : " + ";
      s += body;
    }
  };
  for (const auto& [axis, k] : k_) {
    const int64_t mag = k < 0 ? -k : k;
    term(k, mag == 1 ? axis : axis + "*" + std::to_string(mag));
  }
  if (c_ != 0) term(c_, std::to_string(c_ < 0 ? -c_ : c_));
  return s;
}

nlohmann::json Aff::attr() const {
  if (constant()) return c_;
  return {{"expr", expr()}};
}

std::string Aff::text() const {
  if (constant()) return std::to_string(c_);
  return "{" + expr().get<std::string>() + "}";
}

Aff Aff::operator+(const Aff& o) const {
  Aff r = *this;
  r.c_ += o.c_;
  for (const auto& [axis, k] : o.k_)
    if ((r.k_[axis] += k) == 0) r.k_.erase(axis);
  return r;
}

Aff Aff::operator*(int64_t f) const {
  Aff r(c_ * f);
  if (f != 0)
    for (const auto& [axis, k] : k_) r.k_[axis] = k * f;
  return r;
}

}  // namespace shardproof::planner
