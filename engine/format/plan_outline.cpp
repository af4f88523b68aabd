#include "engine/format/plan_outline.h"

#include <cstring>

namespace shardproof {
namespace {

struct Malformed {};

class OutlineScanner {
 public:
  explicit OutlineScanner(std::string_view text)
      : p_(text.data()), begin_(text.data()), end_(text.data() + text.size()) {}

  std::optional<PlanOutline> run() {
    try {
      if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;
      bool logical = false, parallel = false;
      scan_object([&](std::string_view key) {
        if (key == "logical" && !logical) {
          logical = true;
          return scan_graph(outline_.logical_ops);
        }
        if (key == "parallel" && !parallel) {
          parallel = true;
          return scan_graph(outline_.parallel_ops);
        }
        return false;
      });
      skip_space();
      if (p_ != end_ || !logical || !parallel || !logical_ops_ || !parallel_ops_)
        return std::nullopt;
      return std::move(outline_);
    } catch (const Malformed&) {
      return std::nullopt;
    }
  }

 private:
  [[noreturn]] static void malformed() { throw Malformed{}; }

  char peek() {
    if (p_ == end_) malformed();
    return *p_;
  }

  void skip_space() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  // Calls `member(key)` with p_ at each member's value; it scans the value
  // and returns true, or returns false to have it skipped.
  template <class Member>
  void scan_object(Member member) {
    skip_space();
    if (peek() != '{') malformed();
    ++p_;
    skip_space();
    if (peek() == '}') {
      ++p_;
      return;
    }
    for (;;) {
      std::string_view key = raw_key();
      skip_space();
      if (peek() != ':') malformed();
      ++p_;
      skip_space();
      if (!member(key)) skip_value();
      skip_space();
      char c = peek();
      ++p_;
      if (c == '}') return;
      if (c != ',') malformed();
      skip_space();
    }
  }

  // A key's bytes between its quotes; keys with escapes are not compared.
  std::string_view raw_key() {
    if (peek() != '"') malformed();
    const char* start = ++p_;
    while (peek() != '"') {
      if (*p_ == '\\') malformed();
      ++p_;
    }
    return {start, static_cast<size_t>(p_++ - start)};
  }

  bool scan_graph(std::vector<TextSpan>& ops) {
    if (peek() != '{') return false;  // a graph file reference: not outlined
    bool* found = &ops == &outline_.logical_ops ? &logical_ops_ : &parallel_ops_;
    scan_object([&](std::string_view key) {
      if (key != "ops" || *found || peek() != '[') return false;
      *found = true;
      scan_elements(ops);
      return true;
    });
    return true;
  }

  void scan_elements(std::vector<TextSpan>& spans) {
    ++p_;  // '['
    skip_space();
    if (peek() == ']') {
      ++p_;
      return;
    }
    for (;;) {
      size_t start = static_cast<size_t>(p_ - begin_);
      skip_value();
      spans.push_back({start, static_cast<size_t>(p_ - begin_)});
      skip_space();
      char c = peek();
      ++p_;
      if (c == ']') return;
      if (c != ',') malformed();
      skip_space();
    }
  }

  void skip_string() {
    ++p_;  // the opening quote
    for (;;) {
      char c = peek();
      ++p_;
      if (c == '"') return;
      if (c == '\\') {
        peek();
        ++p_;
      }
    }
  }

  // One value: a string, a bracketed container (strings inside skipped), or
  // a literal or number up to the next delimiter.
  void skip_value() {
    char c = peek();
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      int depth = 0;
      for (;;) {
        c = peek();
        if (c == '"') {
          skip_string();
          continue;
        }
        ++p_;
        if (c == '{' || c == '[') {
          ++depth;
        } else if (c == '}' || c == ']') {
          if (--depth == 0) return;
        }
      }
    }
    const char* start = p_;
    while (p_ != end_ && !std::strchr(",}] \t\r\n", *p_)) ++p_;
    if (p_ == start) malformed();
  }

  const char* p_;
  const char* begin_;
  const char* end_;
  PlanOutline outline_;
  bool logical_ops_ = false, parallel_ops_ = false;
};

}  // namespace

std::optional<PlanOutline> outline_plan(std::string_view text) {
  return OutlineScanner(text).run();
}

}  // namespace shardproof
