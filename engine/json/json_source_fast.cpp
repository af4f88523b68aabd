// The fast JSON reader: one pass over the text that builds the tree with its
// positions directly. It accepts only documents the checked reader
// (json_source_checked.cpp) accepts, and gives the same tree for them; on
// anything else it gives up, and jsonsrc::parse asks the checked reader.
// The grammar below follows nlohmann's lexer and parser rule for rule.
#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "engine/json/json_source_readers.h"
#include "engine/json/json_source_tree.h"

namespace shardproof::jsonsrc::detail {
namespace {

// Reading recurses once per open container; deeper documents go to the
// checked reader, whose parser keeps its stack on the heap.
constexpr int kMaxFastDepth = 512;

// Numbers whose decimal magnitude stays below this are finite doubles; the
// checked reader rejects numbers that overflow, so larger ones go to it.
constexpr int64_t kSafeMagnitude = 300;

// Objects with more members than this find duplicate keys with a hash set.
constexpr size_t kLinearKeyCheck = 16;

struct GiveUp {};

// The first byte of a UTF-8 sequence tells how many continuation bytes follow
// and the range of the first of them; the rest are all 80..BF. Overlong forms,
// surrogates and code points past U+10FFFF are ill-formed (as for nlohmann).
struct Utf8Lead {
  int continuation = -1;  // -1: not a valid lead byte
  unsigned char lo = 0x80, hi = 0xBF;
};

Utf8Lead utf8_lead(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return {1, 0x80, 0xBF};
  if (c == 0xE0) return {2, 0xA0, 0xBF};
  if (c == 0xED) return {2, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {2, 0x80, 0xBF};
  if (c == 0xF0) return {3, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {3, 0x80, 0xBF};
  if (c == 0xF4) return {3, 0x80, 0x8F};
  return {};
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp <= 0x7FF) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp <= 0xFFFF) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class FastReader {
 public:
  FastReader(const std::string& text, int max_depth)
      : p_(text.data()),
        end_(text.data() + text.size()),
        line_start_(p_),
        max_depth_(std::min(max_depth, kMaxFastDepth)) {}

  std::shared_ptr<Value> run() {
    try {
      if (end_ - p_ >= 3 && std::string_view(p_, 3) == "\xEF\xBB\xBF") {
        p_ += 3;
        line_start_ = p_;  // the BOM takes no column
      }
      skip_space();
      read_value(tree_.item(), 0);
      skip_space();
      if (p_ != end_) return nullptr;
      return tree_.finish();
    } catch (const GiveUp&) {
      return nullptr;
    }
  }

 private:
  [[noreturn]] static void give_up() { throw GiveUp{}; }

  // Columns count code points: UTF-8 continuation bytes (only ever inside
  // strings) take none. Newlines only ever come outside strings.
  Pos pos() const {
    return {line_,
            static_cast<int>(p_ - line_start_ - (continuation_ - continuation_at_line_)) + 1};
  }

  char peek() const {
    if (p_ == end_) give_up();
    return *p_;
  }

  void expect(char c) {
    if (peek() != c) give_up();
    ++p_;
  }

  void skip_space() {
    while (p_ != end_) {
      char c = *p_;
      if (c == '\n') {
        ++p_;
        ++line_;
        line_start_ = p_;
        continuation_at_line_ = continuation_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++p_;
      } else {
        return;
      }
    }
  }

  void read_value(Value& v, int depth) {
    v.pos = pos();
    switch (peek()) {
      case '{':
        return read_object(v, depth + 1);
      case '[':
        return read_array(v, depth + 1);
      case '"':
        v.kind = Value::Kind::String;
        return read_string(v.text);
      case 't':
        read_literal("true");
        v.kind = Value::Kind::Bool;
        v.boolean = true;
        return;
      case 'f':
        read_literal("false");
        v.kind = Value::Kind::Bool;
        return;
      case 'n':
        read_literal("null");
        return;
      default:
        v.kind = Value::Kind::Number;
        return read_number(v.text);
    }
  }

  void read_literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word)
      give_up();
    p_ += word.size();
  }

  // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, kept as written.
  void read_number(std::string& text) {
    const char* begin = p_;
    if (p_ != end_ && *p_ == '-') ++p_;
    const char* int_begin = p_;
    if (peek() == '0') {
      ++p_;
    } else {
      if (!is_digit(peek())) give_up();
      while (p_ != end_ && is_digit(*p_)) ++p_;
    }
    int64_t magnitude = p_ - int_begin;  // digits before the point
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!is_digit(peek())) give_up();
      while (p_ != end_ && is_digit(*p_)) ++p_;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      bool negative = false;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) negative = *p_++ == '-';
      if (!is_digit(peek())) give_up();
      int64_t exponent = 0;
      for (; p_ != end_ && is_digit(*p_); ++p_)
        exponent = std::min<int64_t>(exponent * 10 + (*p_ - '0'), kSafeMagnitude + 1);
      // A negative exponent can only make the number smaller: still finite.
      if (!negative) magnitude += exponent;
    }
    if (magnitude > kSafeMagnitude) give_up();
    text = std::string(begin, p_);  // constructed whole: cheaper than assign
  }

  void read_string(std::string& out) {
    ++p_;                  // the opening quote
    const char* run = p_;  // start of the bytes not yet copied to `out`
    while (true) {
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') break;
      if (c < 0x20) give_up();  // control characters must be escaped
      if (c == '\\') {
        out.append(run, p_);
        read_escape(out);
        run = p_;
      } else if (c >= 0x80) {
        read_utf8_sequence();
      } else {
        ++p_;
      }
    }
    // Most strings have no escape: constructed whole, cheaper than appended.
    if (out.empty())
      out = std::string(run, p_);
    else
      out.append(run, p_);
    ++p_;  // the closing quote
  }

  void read_utf8_sequence() {
    Utf8Lead lead = utf8_lead(static_cast<unsigned char>(*p_));
    if (lead.continuation < 0 || end_ - p_ <= lead.continuation) give_up();
    ++p_;
    for (int k = 0; k < lead.continuation; ++k, ++p_) {
      unsigned char b = static_cast<unsigned char>(*p_);
      unsigned char lo = k == 0 ? lead.lo : 0x80, hi = k == 0 ? lead.hi : 0xBF;
      if (b < lo || b > hi) give_up();
    }
    continuation_ += lead.continuation;
  }

  void read_escape(std::string& out) {
    ++p_;  // the backslash
    char e = peek();
    ++p_;
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        give_up();
    }
    unsigned cp = read_hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) give_up();  // a low surrogate needs a high one first
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      expect('\\');
      expect('u');
      unsigned low = read_hex4();
      if (low < 0xDC00 || low > 0xDFFF) give_up();
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, cp);
  }

  unsigned read_hex4() {
    if (end_ - p_ < 4) give_up();
    unsigned cp = 0;
    for (int k = 0; k < 4; ++k, ++p_) {
      int h = hex_value(*p_);
      if (h < 0) give_up();
      cp = cp * 16 + static_cast<unsigned>(h);
    }
    return cp;
  }

  // The checked reader counts every open container, the root included.
  void open(Value& v, Value::Kind kind, int depth) {
    if (depth > max_depth_) give_up();
    tree_.open(v, kind);
    ++p_;  // the bracket
    skip_space();
  }

  void read_array(Value& v, int depth) {
    open(v, Value::Kind::Array, depth);
    if (peek() != ']') {
      while (true) {
        read_value(tree_.item(), depth);
        skip_space();
        if (peek() != ',') break;
        ++p_;
        skip_space();
      }
    }
    expect(']');
    tree_.close();
  }

  void read_object(Value& v, int depth) {
    open(v, Value::Kind::Object, depth);
    if (peek() != '}') {
      while (true) {
        if (peek() != '"') give_up();
        Key& key = tree_.key();
        key.pos = pos();
        read_string(key.name);
        skip_space();
        expect(':');
        skip_space();
        read_value(tree_.item(), depth);
        skip_space();
        if (peek() != ',') break;
        ++p_;
        skip_space();
      }
    }
    expect('}');
    if (has_duplicate(tree_.open_keys())) give_up();
    tree_.close();
  }

  static bool has_duplicate(const std::vector<Key>& keys) {
    if (keys.size() <= kLinearKeyCheck) {
      for (size_t i = 1; i < keys.size(); ++i)
        for (size_t j = 0; j < i; ++j)
          if (keys[i].name == keys[j].name) return true;
      return false;
    }
    std::unordered_set<std::string_view> seen;
    seen.reserve(keys.size());
    for (const Key& k : keys)
      if (!seen.insert(k.name).second) return true;
    return false;
  }

  const char* p_;
  const char* end_;
  const char* line_start_;
  int line_ = 1;
  int64_t continuation_ = 0;          // UTF-8 continuation bytes read so far
  int64_t continuation_at_line_ = 0;  // ... when the current line began
  int max_depth_;
  TreeBuilder tree_;
};

}  // namespace

std::shared_ptr<Value> parse_fast(const std::string& text, int max_depth) {
  return FastReader(text, max_depth).run();
}

}  // namespace shardproof::jsonsrc::detail
