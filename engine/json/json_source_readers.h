// The two readers behind jsonsrc::parse (json_source.h). The checked reader
// (nlohmann's grammar plus a position scanner) reads any text and says
// exactly what is wrong with a bad one. The fast reader does the common case,
// a well-formed document, in one pass without nlohmann; it gives up on
// anything it is not sure of, and parse() then asks the checked reader, so
// every error message still comes from one place.
#pragma once

#include <memory>
#include <string>

#include "engine/json/json_source.h"

namespace shardproof::jsonsrc::detail {

// The tree parse_checked gives for `text`, or null: the text may be invalid
// (a syntax error, a duplicate key, a number too large for a double, nesting
// deeper than max_depth) or merely unusual (very deep nesting).
std::shared_ptr<Value> parse_fast(const std::string& text, int max_depth);

// Any text: the tree, or the first error with its position. Throws only
// what allocation throws.
ParseResult parse_checked(const std::string& text, int max_depth);

}  // namespace shardproof::jsonsrc::detail
