// The checked JSON reader: nlohmann's SAX parser checks the grammar, and a
// token pass of our own adds the positions nlohmann does not keep. It is the
// reference for what jsonsrc accepts and the source of every JSON error
// message (json_source_readers.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_set>

#include "engine/json/json_source_readers.h"
#include "engine/json/json_source_tree.h"

namespace shardproof::jsonsrc::detail {
namespace {

// One value or key as it starts in the text; numbers keep their text.
struct Token {
  bool key = false;
  Pos pos;
  size_t begin = 0, end = 0;
};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_structural(char c) {
  return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':' || c == '"';
}
// UTF-8 continuation bytes do not start a code point, so they add no column.
bool starts_code_point(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
}

size_t bom_length(const std::string& text) {
  return text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
}

// Walks the text once, tracking line:column, and lists where every value and
// key starts, in document order: the same order nlohmann's SAX events come in.
// Tolerant of invalid input (it never reads past the end); its result is only
// trusted once nlohmann has accepted the grammar.
class Scanner {
 public:
  explicit Scanner(const std::string& text) : t_(text) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    i_ = bom_length(t_);
    while (i_ < t_.size()) {
      char c = t_[i_];
      if (is_space(c) || c == '}' || c == ']' || c == ',' || c == ':') {
        step_to(i_ + 1);
      } else if (c == '"') {
        tokens.push_back(scan_string());
      } else if (c == '{' || c == '[') {
        tokens.push_back({false, pos(), i_, i_ + 1});
        step_to(i_ + 1);
      } else {
        tokens.push_back(scan_bare());
      }
    }
    return tokens;
  }

 private:
  Pos pos() const { return {line_, column_}; }

  void step_to(size_t j) {
    for (; i_ < j && i_ < t_.size(); ++i_) {
      if (t_[i_] == '\n') {
        ++line_;
        column_ = 1;
      } else if (starts_code_point(t_[i_])) {
        ++column_;
      }
    }
  }

  // A string is a key when the next non-space character is ':'.
  Token scan_string() {
    Token tok{false, pos(), i_, 0};
    size_t j = i_ + 1;
    while (j < t_.size() && t_[j] != '"') j += t_[j] == '\\' ? 2 : 1;
    tok.end = std::min(j + 1, t_.size());
    size_t k = tok.end;
    while (k < t_.size() && is_space(t_[k])) ++k;
    tok.key = k < t_.size() && t_[k] == ':';
    step_to(tok.end);
    return tok;
  }

  // Numbers and literals: everything up to the next space or structural char.
  Token scan_bare() {
    Token tok{false, pos(), i_, i_};
    size_t j = i_;
    while (j < t_.size() && !is_space(t_[j]) && !is_structural(t_[j])) ++j;
    tok.end = std::max(j, i_ + 1);
    step_to(tok.end);
    return tok;
  }

  const std::string& t_;
  size_t i_ = 0;
  int line_ = 1, column_ = 1;
};

Pos position_of_offset(const std::string& text, size_t offset) {
  Pos p{1, 1};
  offset = std::min(offset, text.size());
  for (size_t i = bom_length(text); i < offset; ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else if (starts_code_point(text[i])) {
      ++p.column;
    }
  }
  return p;
}

// "[json.exception.parse_error.101] parse error at line 1, column 2: syntax
// error ..." -> "syntax error ...": we print our own position.
std::string strip_nlohmann_prefix(std::string msg) {
  if (msg.rfind("[json.exception.", 0) == 0) {
    size_t close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
  }
  if (msg.rfind("parse error at line ", 0) == 0) {
    size_t colon = msg.find(": ");
    if (colon != std::string::npos) msg = msg.substr(colon + 2);
  }
  return msg;
}

using nl = nlohmann::json;

// Builds the Value tree from SAX events, taking positions from the scanner.
class Builder : public nlohmann::json_sax<nl> {
 public:
  Builder(const std::string& text, std::vector<Token> tokens, int max_depth)
      : text_(text), tokens_(std::move(tokens)), max_depth_(max_depth) {}

  bool null() override { return leaf(Value::Kind::Null) != nullptr; }
  bool boolean(bool val) override {
    Value* v = leaf(Value::Kind::Bool);
    v->boolean = val;
    return true;
  }
  bool number_integer(number_integer_t) override { return number(); }
  bool number_unsigned(number_unsigned_t) override { return number(); }
  bool number_float(number_float_t, const string_t&) override { return number(); }
  bool string(string_t& val) override {
    leaf(Value::Kind::String)->text = std::move(val);
    return true;
  }
  bool binary(binary_t&) override {
    return fail_at(next_value_pos(), "binary values are not JSON");
  }

  bool start_object(std::size_t) override { return open(Value::Kind::Object); }
  bool start_array(std::size_t) override { return open(Value::Kind::Array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& val) override {
    Token tok = next_token();
    std::unordered_set<std::string>& seen = seen_keys_.back();
    if (!seen.insert(val).second) {
      error_ = ParseError{"duplicate-key", "duplicate key \"" + val + "\" in an object", tok.pos,
                          tree_.open_pointer() + "/" + pointer_token(val)};
      return false;
    }
    Key& key = tree_.key();
    key.name = std::move(val);
    key.pos = tok.pos;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (error_) return false;  // ours came first
    size_t offset = position > 0 ? position - 1 : 0;
    return fail_at(position_of_offset(text_, offset), strip_nlohmann_prefix(ex.what()));
  }

  // The document, once the parser has accepted it.
  std::shared_ptr<Value> root() { return has_root_ ? tree_.finish() : nullptr; }
  std::optional<ParseError>& error() { return error_; }

 private:
  // Keys and values come in the scanner's list exactly in SAX order.
  Token next_token() { return cursor_ < tokens_.size() ? tokens_[cursor_++] : Token{}; }
  Pos next_value_pos() const { return cursor_ < tokens_.size() ? tokens_[cursor_].pos : Pos{}; }

  bool number() {
    Token tok = next_token();
    Value* v = attach(Value::Kind::Number, tok.pos);
    v->text = text_.substr(tok.begin, tok.end - tok.begin);
    return true;
  }

  Value* leaf(Value::Kind kind) { return attach(kind, next_token().pos); }

  // Adds a value under the open container (or as the root).
  Value* attach(Value::Kind kind, Pos pos) {
    has_root_ = true;
    Value& v = tree_.item();
    v.kind = kind;
    v.pos = pos;
    return &v;
  }

  bool open(Value::Kind kind) {
    Pos pos = next_token().pos;
    if (static_cast<int>(seen_keys_.size()) >= max_depth_)
      return fail_at(pos, "nesting deeper than " + std::to_string(max_depth_) + " levels");
    tree_.open(*attach(kind, pos), kind);
    seen_keys_.emplace_back();
    return true;
  }

  bool close() {
    tree_.close();
    seen_keys_.pop_back();
    return true;
  }

  bool fail_at(Pos pos, std::string message) {
    if (!error_) error_ = ParseError{"json", std::move(message), pos, ""};
    return false;
  }

  const std::string& text_;
  std::vector<Token> tokens_;
  size_t cursor_ = 0;
  int max_depth_;
  TreeBuilder tree_;
  bool has_root_ = false;
  std::vector<std::unordered_set<std::string>> seen_keys_;  // per open container
  std::optional<ParseError> error_;
};

}  // namespace

ParseResult parse_checked(const std::string& text, int max_depth) {
  ParseResult result;
  Builder builder(text, Scanner(text).run(), max_depth);
  bool ok = nl::sax_parse(text.begin(), text.end(), &builder, nl::input_format_t::json, true);
  if (!ok || builder.error() || !builder.root()) {
    result.error = builder.error().value_or(ParseError{"json", "not a JSON document", {1, 1}, ""});
  } else {
    result.value = builder.root();
  }
  return result;
}

}  // namespace shardproof::jsonsrc::detail
