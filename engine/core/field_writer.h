// Length-prefixed fields written as text, for hashing a structure: every
// number ends with ';' and every string is preceded by its length, so the
// encoding is unambiguous. The canonical form of a stage and the renamed
// content of a class verifier's batch are written with it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/attr.h"

namespace shardproof {

class FieldWriter {
 public:
  void text(const std::string& s) {
    number(static_cast<int64_t>(s.size()));
    out_ += s;
  }
  void number(int64_t v) { out_ += std::to_string(v) + ";"; }
  void numbers(const std::vector<int64_t>& v) {
    number(static_cast<int64_t>(v.size()));
    for (int64_t x : v) number(x);
  }
  void ints(const std::vector<int>& v) {
    number(static_cast<int64_t>(v.size()));
    for (int x : v) number(x);
  }
  // A token no number starts with: marks a field only some structures have.
  void tag(const char* t) { out_ += t; }
  // One [lo, hi) pair per dimension.
  void slice(const std::vector<std::pair<int64_t, int64_t>>& s) {
    number(static_cast<int64_t>(s.size()));
    for (auto& [lo, hi] : s) number(lo), number(hi);
  }
  // Each attribute as its key and its describe() text, in key order.
  void attrs(const AttrMap& attrs) {
    number(static_cast<int64_t>(attrs.size()));
    for (const auto& [key, value] : attrs) {
      text(key);
      text(value.describe());
    }
  }
  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace shardproof
