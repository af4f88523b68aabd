// Where the op elements of a plan's two inline graphs lie in its text. A
// re-parse of an edited plan (plan_revision.h) compares a new text with the
// one it parsed before piece by piece: the bytes outside the op elements,
// then each op element.
//
// The scan skips strings and counts brackets; it validates nothing, and it is
// exact only for well-formed JSON. That is all its users need: the outline of
// a text the full parser accepted is right, and a new text is only ever
// trusted where its bytes equal such a text's or where the full parser's
// reader accepts the element alone.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace shardproof {

struct TextSpan {
  size_t begin = 0, end = 0;  // byte offsets, [begin, end)
  size_t size() const { return end - begin; }
};

struct PlanOutline {
  // One span per element of "ops", in order, for "logical" and "parallel".
  std::vector<TextSpan> logical_ops, parallel_ops;
};

// nullopt when the text is not a top-level object whose "logical" and
// "parallel" members are objects each holding an "ops" array, when a key on
// that path is written with escapes, or when the text ends early.
std::optional<PlanOutline> outline_plan(std::string_view text);

}  // namespace shardproof
