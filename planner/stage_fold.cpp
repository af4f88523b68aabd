#include "planner/stage_fold.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace shardproof::planner {
namespace {

using nlohmann::json;

// Where a value sits in a template, which says what it may become when it
// differs between stages.
enum class Ctx {
  Fixed,     // must be equal (shapes, operators, groups, offsets, flags)
  Template,  // a name: a differing number becomes a hole "{8*pp + 3}"
  Expr,      // an expression or condition text: a differing number becomes "(8*pp + 3)"
  Bound,     // a claim's number (slice bound, part, over): an integer may become an expression
  Attr,      // an attribute value: an integer may become {"expr": E}
  Claim,     // a tensor's "of": its tensor a Template, its numbers Bounds
};

bool digit(char ch) {
  return ch >= '0' && ch <= '9';
}

// b*pp + a, as the compact grammar writes it.
std::string affine_text(int64_t b, int64_t a) {
  std::string s = b == 1 ? "pp" : b == -1 ? "-pp" : std::to_string(b) + "*pp";
  if (a > 0) s += " + " + std::to_string(a);
  if (a < 0) s += " - " + std::to_string(-a);
  return s;
}

// A text as its pieces: a run of digits outside braces, a brace group, or
// one other character.
std::vector<std::string> pieces(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    if (digit(s[i])) {
      while (j < s.size() && digit(s[j])) ++j;
    } else if (s[i] == '{') {
      while (j < s.size() && s[j - 1] != '}') ++j;
    }
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

class Generaliser {
 public:
  explicit Generaliser(int64_t stage) : k_(stage) {}

  // The template that gives `a` at pp = k and `b` at pp = k + 1, if any.
  std::optional<json> program(const json& a, const json& b) {
    for (const json* p : {&a, &b})
      for (const auto& [key, value] : p->items())
        if (key != "name" && key != "on" && key != "tensors" && key != "ops") return std::nullopt;
    json out = json::object();
    if (!list(a.at("tensors"), b.at("tensors"), &Generaliser::tensor, out["tensors"]) ||
        !list(a.at("ops"), b.at("ops"), &Generaliser::op, out["ops"]))
      return std::nullopt;
    return out;
  }

 private:
  using Element = bool (Generaliser::*)(const json&, const json&, json&);

  bool list(const json& a, const json& b, Element f, json& out) {
    if (!a.is_array() || !b.is_array() || a.size() != b.size()) return false;
    out = json::array();
    for (size_t i = 0; i < a.size(); ++i) {
      json item;
      if (!(this->*f)(a[i], b[i], item)) return false;
      out.push_back(std::move(item));
    }
    return true;
  }

  // An object whose keys each have a context (others must be equal).
  template <class ContextOf>
  bool object(const json& a, const json& b, json& out, ContextOf context_of) {
    if (!a.is_object() || !b.is_object() || a.size() != b.size()) return false;
    out = json::object();
    for (const auto& [key, va] : a.items()) {
      if (!b.contains(key)) return false;
      if (!value(va, b.at(key), context_of(key), out[key])) return false;
    }
    return true;
  }

  bool tensor(const json& a, const json& b, json& out) {
    return object(a, b, out, [](const std::string& key) {
      if (key == "name") return Ctx::Template;
      if (key == "when") return Ctx::Expr;
      if (key == "of") return Ctx::Claim;
      return Ctx::Fixed;
    });
  }
  bool op(const json& a, const json& b, json& out) {
    if (!object(a, b, out, [](const std::string& key) {
          if (key == "name" || key == "in") return Ctx::Template;
          if (key == "when") return Ctx::Expr;
          if (key == "attrs") return Ctx::Attr;
          return key == "out" ? Ctx::Template : Ctx::Fixed;
        }))
      return false;
    // A send's out is named at the receiver (docs/plan-format.md, "Sends"):
    // in terms of the receiver's pp, k + to.pp.
    if (a.value("op", "") != "send" || !a.contains("to") || !a.at("to").contains("pp")) return true;
    const json& to = a.at("to").at("pp");
    if (!to.is_number_integer()) return false;
    const int64_t k = k_;
    k_ += to.get<int64_t>();
    const bool ok = value(a.at("out"), b.at("out"), Ctx::Template, out["out"]);
    k_ = k;
    return ok;
  }

  bool value(const json& a, const json& b, Ctx ctx, json& out) {
    if (a == b) {
      out = a;
      return true;
    }
    if (ctx == Ctx::Fixed) return false;
    if (a.is_array() && b.is_array()) {
      if (a.size() != b.size()) return false;
      out = json::array();
      for (size_t i = 0; i < a.size(); ++i) {
        json item;
        if (!value(a[i], b[i], ctx, item)) return false;
        out.push_back(std::move(item));
      }
      return true;
    }
    if (a.is_object() && b.is_object()) {
      if (ctx == Ctx::Claim)
        return object(a, b, out, [](const std::string& key) {
          return key == "tensor" ? Ctx::Template : Ctx::Bound;
        });
      if (ctx == Ctx::Attr) {  // attributes by name, or an {"expr": E} value
        if (a.size() == 1 && a.contains("expr") && b.size() == 1 && b.contains("expr"))
          return text(a.at("expr"), b.at("expr"), Ctx::Expr, out["expr"]);
        return object(a, b, out, [](const std::string&) { return Ctx::Attr; });
      }
      return false;
    }
    if (a.is_number_integer() && b.is_number_integer()) {
      if (ctx != Ctx::Bound && ctx != Ctx::Attr) return false;
      const int64_t va = a.get<int64_t>(), vb = b.get<int64_t>();
      const std::string e = affine_text(vb - va, va - (vb - va) * k_);
      out = ctx == Ctx::Bound ? json(e) : json{{"expr", e}};
      return true;
    }
    if (a.is_string() && b.is_string()) return text(a, b, ctx == Ctx::Bound ? Ctx::Expr : ctx, out);
    return false;
  }

  // A name or an expression text, number by number.
  bool text(const json& a, const json& b, Ctx ctx, json& out) {
    if (!a.is_string() || !b.is_string()) return false;
    if (ctx != Ctx::Template && ctx != Ctx::Expr) return a == b && (out = a, true);
    const std::vector<std::string> pa = pieces(a.get<std::string>()),
                                   pb = pieces(b.get<std::string>());
    if (pa.size() != pb.size()) return false;
    std::string s;
    for (size_t i = 0; i < pa.size(); ++i) {
      if (pa[i] == pb[i]) {
        s += pa[i];
        continue;
      }
      if (!digit(pa[i][0]) || !digit(pb[i][0]) || pa[i].size() > 15 || pb[i].size() > 15)
        return false;
      const int64_t va = std::stoll(pa[i]), vb = std::stoll(pb[i]);
      if (std::to_string(va) != pa[i] || std::to_string(vb) != pb[i]) return false;
      const std::string e = affine_text(vb - va, va - (vb - va) * k_);
      if (ctx == Ctx::Template) {
        s += "{" + e + "}";
        continue;
      }
      // In an expression, a number multiplied by an axis must stay a
      // constant (a product of two axes is not affine).
      auto next_to_star = [&](size_t from, int step) {
        for (size_t j = from; j < pa.size(); j += step)
          if (pa[j] != " ") return pa[j] == "*";
        return false;
      };
      if ((i > 0 && next_to_star(i - 1, -1)) || next_to_star(i + 1, 1)) return false;
      s += "(" + e + ")";
    }
    out = s;
    return true;
  }

  int64_t k_;
};

// k when `program` is a pipeline stage's, "on": "pp == k".
std::optional<int64_t> stage_of(const json& program) {
  if (!program.contains("on") || !program.at("on").is_string()) return std::nullopt;
  const std::string on = program.at("on").get<std::string>();
  const std::string prefix = "pp == ";
  if (on.rfind(prefix, 0) != 0 || on.size() == prefix.size() || on.size() > prefix.size() + 9)
    return std::nullopt;
  for (size_t i = prefix.size(); i < on.size(); ++i)
    if (!digit(on[i])) return std::nullopt;
  return std::stoll(on.substr(prefix.size()));
}

}  // namespace

json fold_pipeline_stages(json parallel) {
  const json& programs = parallel.at("programs");
  json out = json::array();
  for (size_t i = 0; i < programs.size();) {
    const std::optional<int64_t> k = stage_of(programs[i]);
    std::optional<json> folded;
    size_t j = i;  // the run is programs i..j
    while (k && j + 1 < programs.size() &&
           stage_of(programs[j + 1]) == std::optional<int64_t>(*k + int64_t(j + 1 - i))) {
      std::optional<json> g =
          Generaliser(*k + int64_t(j - i)).program(programs[j], programs[j + 1]);
      if (!g || (folded && *g != *folded)) break;
      folded = std::move(g);
      ++j;
    }
    if (j - i + 1 < 3) {  // two stages are two corners anyway: nothing to gain
      out.push_back(programs[i]);
      ++i;
      continue;
    }
    const std::string lo = std::to_string(*k), hi = std::to_string(*k + int64_t(j - i));
    json p = {{"name", "stages " + lo + ".." + hi}, {"on", "pp >= " + lo + " && pp <= " + hi}};
    p["tensors"] = std::move(folded->at("tensors"));
    p["ops"] = std::move(folded->at("ops"));
    out.push_back(std::move(p));
    i = j + 1;
  }
  parallel["programs"] = std::move(out);
  return parallel;
}

}  // namespace shardproof::planner
