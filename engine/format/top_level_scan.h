// Finds a JSON object's top-level members without parsing the document:
// nested values are skipped 64 bytes at a time by counting brackets outside
// strings, so a 26 MB plan costs a few milliseconds, not a parse.
#pragma once

#include <initializer_list>
#include <string_view>

namespace shardproof {

// Whether `text` is a JSON object with a top-level member named one of
// `keys` (escapes in member names are decoded) whose value is a string.
// Never false for such a member in a well-formed prefix of the text; may be
// true for malformed text, so a caller that must be exact confirms a true
// with a parser. Trailing text after the top-level value is ignored.
bool has_top_level_string(std::string_view text, std::initializer_list<std::string_view> keys);

}  // namespace shardproof
