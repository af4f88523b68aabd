// A JSON document that remembers where each value came from: line:column of
// every value and object key, and the exact source text of every number (so
// "0.1" stays 1/10). A one-pass reader of our own takes well-formed documents;
// anything else goes to nlohmann/json's grammar check, which words every
// syntax error (json_source_readers.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof::jsonsrc {

struct Pos {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in Unicode code points
};

// An object member's key. Name and position share one vector: a plan has
// ~10^5 objects, and every Value carries the vector's header.
struct Key {
  std::string name;
  Pos pos;  // where the key starts
};

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;          // a string's contents, or a number's source text
  std::vector<Value> items;  // array elements, or object member values
  std::vector<Key> keys;     // object member keys, parallel to items
  Pos pos;                   // where the value starts

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
  std::optional<Value> value;
  std::optional<ParseError> error;
};

// Deeper documents are rejected: keeps the tree's recursive code on a small stack.
constexpr int kMaxDepth = 256;

// Never throws for any input (binary garbage, truncation, deep nesting).
ParseResult parse(const std::string& text, int max_depth = kMaxDepth);

}  // namespace shardproof::jsonsrc
