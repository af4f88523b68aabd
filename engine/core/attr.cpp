#include "engine/core/attr.h"

namespace shardproof {

Attr Attr::of_number(const Rational& r) {
  Attr a;
  a.kind = Kind::Number;
  a.number = r;
  return a;
}
Attr Attr::of_int(int64_t v) {
  return of_number(Rational(std::to_string(v)));
}
Attr Attr::of_bool(bool b) {
  Attr a;
  a.kind = Kind::Bool;
  a.boolean = b;
  return a;
}
Attr Attr::of_string(std::string s) {
  Attr a;
  a.kind = Kind::String;
  a.text = std::move(s);
  return a;
}
Attr Attr::of_list(std::vector<Attr> items) {
  Attr a;
  a.kind = Kind::List;
  a.list = std::move(items);
  return a;
}
Attr Attr::of_int_list(const std::vector<int64_t>& items) {
  std::vector<Attr> list;
  for (int64_t v : items) list.push_back(of_int(v));
  return of_list(std::move(list));
}

bool Attr::is_int_list() const {
  if (kind != Kind::List) return false;
  for (const Attr& a : list)
    if (!a.is_int()) return false;
  return true;
}

std::vector<int64_t> Attr::as_int_list() const {
  std::vector<int64_t> out;
  for (const Attr& a : list) out.push_back(a.as_int());
  return out;
}

std::string Attr::describe() const {
  switch (kind) {
    case Kind::Number:
      return rational_to_string(number);
    case Kind::Bool:
      return boolean ? "true" : "false";
    case Kind::String:
      return "\"" + text + "\"";
    case Kind::List: {
      std::string s = "[";
      for (size_t i = 0; i < list.size(); ++i) s += (i ? "," : "") + list[i].describe();
      return s + "]";
    }
  }
  return "?";
}

}  // namespace shardproof
