// An op attribute value as written in the plan: exact number, bool, string or
// list. Numbers keep their exact value (see rational.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/rational.h"

namespace shardproof {

struct Attr {
  enum class Kind { Number, Bool, String, List };
  Kind kind = Kind::Number;
  Rational number;
  bool boolean = false;
  std::string text;
  std::vector<Attr> list;

  static Attr of_number(const Rational& r);
  static Attr of_int(int64_t v);
  static Attr of_bool(bool b);
  static Attr of_string(std::string s);
  static Attr of_list(std::vector<Attr> items);
  static Attr of_int_list(const std::vector<int64_t>& items);

  bool is_int() const { return kind == Kind::Number && rational_is_int64(number); }
  bool is_int_list() const;
  int64_t as_int() const { return rational_to_int64(number); }
  std::vector<int64_t> as_int_list() const;
  std::string describe() const;  // JSON-ish text for messages and hashing
};

using AttrMap = std::map<std::string, Attr>;

}  // namespace shardproof
