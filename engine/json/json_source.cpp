// The JSON document with positions: parse() picks a reader
// (json_source_readers.h); describing and writing values back out.
#include "engine/json/json_source.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>

#include "engine/json/json_source_readers.h"

namespace shardproof::jsonsrc {
namespace {

using nl = nlohmann::json;

void append_string(std::string& out, const std::string& s) {
  out += nl(s).dump(-1, ' ', false, nl::error_handler_t::replace);
}

void serialize_into(std::string& out, const Value& v) {
  switch (v.kind) {
    case Value::Kind::Null:
      out += "null";
      break;
    case Value::Kind::Bool:
      out += v.boolean ? "true" : "false";
      break;
    case Value::Kind::Number:
      out += v.text;
      break;
    case Value::Kind::String:
      append_string(out, v.text);
      break;
    case Value::Kind::Array:
      out += '[';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        serialize_into(out, v.items[i]);
      }
      out += ']';
      break;
    case Value::Kind::Object:
      out += '{';
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i) out += ',';
        append_string(out, v.keys[i].name);
        out += ':';
        serialize_into(out, v.items[i]);
      }
      out += '}';
      break;
  }
}

}  // namespace

int Value::find(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i].name == key) return static_cast<int>(i);
  return -1;
}

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::Null:
      return "null";
    case Value::Kind::Bool:
      return "a boolean";
    case Value::Kind::Number:
      return "a number";
    case Value::Kind::String:
      return "a string";
    case Value::Kind::Array:
      return "an array";
    case Value::Kind::Object:
      return "an object";
  }
  return "?";
}

std::string describe(const Value& value) {
  switch (value.kind) {
    case Value::Kind::Bool:
      return value.boolean ? "true" : "false";
    case Value::Kind::Number:
      return "number " + value.text;
    case Value::Kind::String: {
      std::string s;
      append_string(s, value.text.size() > 60 ? value.text.substr(0, 60) + "..." : value.text);
      return "string " + s;
    }
    default:
      return kind_name(value.kind);
  }
}

std::string serialize(const Value& value) {
  std::string out;
  serialize_into(out, value);
  return out;
}

std::string pointer_token(const std::string& key) {
  // Nearly every key has neither character.
  if (std::none_of(key.begin(), key.end(), [](char c) { return c == '~' || c == '/'; })) return key;
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

ParseResult parse(const std::string& text, int max_depth) {
  ParseResult result;
  try {
    if (std::shared_ptr<Value> fast = detail::parse_fast(text, max_depth)) {
      result.value = std::move(fast);
      return result;
    }
    result = detail::parse_checked(text, max_depth);
  } catch (const std::exception& e) {
    // nlohmann reports errors through parse_error; this is for bad_alloc and the like.
    result.value.reset();
    result.error = ParseError{"json", std::string("cannot read the document: ") + e.what(), {}, ""};
  }
  return result;
}

}  // namespace shardproof::jsonsrc
