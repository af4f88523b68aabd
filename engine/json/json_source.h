// A JSON document that remembers where each value came from: line:column of
// every value and object key, and the exact source text of every number (so
// "0.1" stays 1/10). A one-pass reader of our own takes well-formed documents;
// anything else goes to nlohmann/json's grammar check, which words every
// syntax error (json_source_readers.h).
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof::jsonsrc {

struct Pos {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in Unicode code points
};

// An object member's key and where it starts.
struct Key {
  std::string name;
  Pos pos;  // where the key starts
};

// The members of an array or object: a run of values (or keys) that their
// document stores side by side (ParseResult::value owns the document).
// Copying a Value copies this view, not the members.
template <class T>
class Span {
 public:
  Span() = default;
  Span(T* data, size_t size) : data_(data), size_(size) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T* data() const { return data_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& operator[](size_t i) { return data_[i]; }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("jsonsrc::Span::at");
    return data_[i];
  }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;   // a string's contents, or a number's source text
  Span<Value> items;  // array elements, or object member values
  Span<Key> keys;     // object member keys, parallel to items
  Pos pos;            // where the value starts

  bool is(Kind k) const { return kind == k; }
  // Index of the member named `key` in an object, -1 when absent.
  int find(std::string_view key) const;
};

// "an object", "an array", "a string", "a number", "a boolean", "null".
const char* kind_name(Value::Kind kind);
// Short text for messages: `string "abc"`, `number 1.5`, `true`, `an array`.
std::string describe(const Value& value);
// Compact JSON; numbers are written as in the source.
std::string serialize(const Value& value);
// Escapes one JSON pointer reference token ("~" -> "~0", "/" -> "~1").
std::string pointer_token(const std::string& key);

struct ParseError {
  std::string rule;     // "json" (syntax, depth) or "duplicate-key"
  std::string message;  // what was expected and what was found
  Pos pos;
  std::string pointer;  // where known (duplicate keys), else ""
};

struct ParseResult {
  std::shared_ptr<Value> value;  // the root; it owns the whole document
  std::optional<ParseError> error;
};

// Deeper documents are rejected: keeps the tree's recursive code on a small stack.
constexpr int kMaxDepth = 256;

// Never throws for any input (binary garbage, truncation, deep nesting).
ParseResult parse(const std::string& text, int max_depth = kMaxDepth);

}  // namespace shardproof::jsonsrc
