// Typed reads of plan JSON values, each failing with a located Diagnostic.
#include <algorithm>
#include <charconv>
#include <functional>

#include "engine/core/did_you_mean.h"
#include "engine/core/rational.h"
#include "engine/format/v1/plan_validation.h"

namespace shardproof::plan_detail {
namespace {

[[noreturn]] void throw_at(std::string_view rule, const std::string& file,
                           const std::string& pointer, jsonsrc::Pos pos,
                           const std::string& message) {
  throw InvalidPlan{Diagnostic{std::string(rule), file, pointer, pos.line, pos.column, message}};
}

// The indices that lead from `at` down to `target`; false when `target` is
// not below `at`. Looks among the direct members first, so values near the
// top (a graph under the plan root) are found without a walk.
bool path_to(const jsonsrc::Value& at, const jsonsrc::Value* target, std::vector<size_t>& path) {
  const jsonsrc::Span<jsonsrc::Value>& items = at.items;
  std::less<const jsonsrc::Value*> before;
  if (!items.empty() && !before(target, items.data()) &&
      before(target, items.data() + items.size())) {
    path.push_back(static_cast<size_t>(target - items.data()));
    return true;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    path.push_back(i);
    if (path_to(items[i], target, path)) return true;
    path.pop_back();
  }
  return false;
}

}  // namespace

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

std::string Node::pointer() const {
  std::vector<size_t> path;
  path_to(*doc_, v_, path);
  std::string p;
  const jsonsrc::Value* at = doc_;
  for (size_t i : path) {
    p += "/" + (at->is(jsonsrc::Value::Kind::Object) ? jsonsrc::pointer_token(at->keys[i].name)
                                                     : std::to_string(i));
    at = &at->items[i];
  }
  return p;
}

std::optional<Node> Node::get(std::string_view key) const {
  if (!v_->is(jsonsrc::Value::Kind::Object)) return std::nullopt;
  int i = v_->find(key);
  if (i < 0) return std::nullopt;
  return member(static_cast<size_t>(i));
}

void Node::fail(std::string_view rule, const std::string& message) const {
  throw_at(rule, *file_, pointer(), v_->pos, message);
}

void Node::fail_at_key(size_t i, std::string_view rule, const std::string& message) const {
  const jsonsrc::Key& key = v_->keys.at(i);
  throw_at(rule, *file_, pointer() + "/" + jsonsrc::pointer_token(key.name), key.pos, message);
}

void Node::fail_missing(std::string_view key, std::string_view rule,
                        const std::string& what) const {
  throw_at(rule, *file_, pointer() + "/" + jsonsrc::pointer_token(std::string(key)), v_->pos,
           what + " needs the key " + quoted(key) + ", which is missing");
}

void expect_object(const Node& n, What what) {
  if (!n->is(jsonsrc::Value::Kind::Object))
    n.fail("type", what.str() + ": expected an object, found " + jsonsrc::describe(n.value()));
}

void expect_array(const Node& n, What what, std::string_view rule) {
  if (!n->is(jsonsrc::Value::Kind::Array))
    n.fail(rule, what.str() + ": expected an array, found " + jsonsrc::describe(n.value()));
}

const std::string& expect_string(const Node& n, What what, std::string_view rule) {
  if (!n->is(jsonsrc::Value::Kind::String))
    n.fail(rule, what.str() + ": expected a string, found " + jsonsrc::describe(n.value()));
  return n->text;
}

int64_t expect_int(const Node& n, std::string_view rule, What what, int64_t lo, int64_t hi) {
  // Built only for a message: plans hold millions of integers.
  auto range = [&] {
    if (hi == INT64_MAX && lo == 0) return std::string("a non-negative integer");
    if (hi == INT64_MAX && lo == 1) return std::string("a positive integer");
    return "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  };
  if (!n->is(jsonsrc::Value::Kind::Number))
    n.fail(rule, what.str() + ": expected " + range() + ", found " + jsonsrc::describe(n.value()));
  int64_t v = 0;
  // Fast path: a plain decimal integer (no fraction, exponent or sign other
  // than '-'), the form nearly every integer in a plan has.
  const std::string& text = n->text;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end) {
    std::optional<Rational> r = parse_exact_number(text);
    if (!r || !rational_is_int64(*r))
      n.fail(rule,
             what.str() + ": expected " + range() + ", found " + jsonsrc::describe(n.value()));
    v = rational_to_int64(*r);
  }
  if (v < lo || v > hi)
    n.fail(rule, what.str() + ": expected " + range() + ", found " + std::to_string(v));
  return v;
}

void check_keys(const Node& obj, std::initializer_list<std::string_view> allowed, What what) {
  const jsonsrc::Value& v = obj.value();
  for (size_t i = 0; i < v.keys.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), v.keys[i].name) != allowed.end()) continue;
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + quoted(a);
    obj.fail_at_key(i, "unknown-key",
                    "unknown key " + quoted(v.keys[i].name) + " in " + what.str() +
                        " (allowed: " + list + ")" + did_you_mean(v.keys[i].name, allowed));
  }
}

Node require(const Node& obj, std::string_view key, What what, std::string_view rule) {
  std::optional<Node> n = obj.get(key);
  if (!n) obj.fail_missing(key, rule, what.str());
  return *n;
}

std::shared_ptr<const SourceRef> read_source(const Node& n, What what, SourceInterner& seen) {
  auto sw = [&] { return what.str() + " src"; };
  if (!n->is(jsonsrc::Value::Kind::Object))
    n.fail("src", sw() + ": expected {\"file\": F, \"line\": N, \"function\": FN}, found " +
                      jsonsrc::describe(n.value()));
  check_keys(n, {"file", "line", "function"}, sw);
  SourceRef src;
  src.file = expect_string(
      require(n, "file", sw, "src"), [&] { return sw() + " file"; }, "src");
  if (src.file.empty()) n.get("file")->fail("src", sw() + " file: a file name is not empty");
  src.line = expect_int(
      require(n, "line", sw, "src"), "src", [&] { return sw() + " line"; }, 1, INT32_MAX);
  if (std::optional<Node> fn = n.get("function"))
    src.function = expect_string(
        *fn, [&] { return sw() + " function"; }, "src");
  std::string key = src.file + '\0' + std::to_string(src.line) + '\0' + src.function;
  std::shared_ptr<const SourceRef>& interned = seen[key];
  if (!interned) interned = std::make_shared<const SourceRef>(std::move(src));
  return interned;
}

std::string claim_text(const Lineage& lin) {
  std::string s = lin.tensor + "[";
  for (size_t d = 0; d < lin.slice.size(); ++d)
    s += (d ? ", " : "") + std::to_string(lin.slice[d].first) + ":" +
         std::to_string(lin.slice[d].second);
  s += "]";
  if (lin.has_part)
    s += " part " + std::to_string(lin.part_k) + " of " + std::to_string(lin.part_n);
  if (!lin.over.empty()) s += " over " + over_to_string(lin.over);
  if (lin.scaled()) s += " scaled by " + rational_to_string(lin.scale());
  return s;
}

}  // namespace shardproof::plan_detail
