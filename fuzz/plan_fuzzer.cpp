// libFuzzer: the plan reader on any bytes, both forms (the "format" key
// picks v1 or the compact 1.1 form), and the compact expression reader on
// its own. Nothing may crash, hang, overflow or read outside the plan:
// graph references resolve against an empty directory (scripts/fuzz/plan.sh).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/format/compact/compact_expr.h"
#include "engine/format/plan_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  shardproof::ParseOptions options;
  // Expanding is where size limits matter; the class path only reads.
  options.compact = shardproof::ParseOptions::Compact::Expand;
  shardproof::parse_plan_text(text, "fuzz.json", "", options);
  // The same bytes as an expression, a condition and a template over every axis.
  const shardproof::compact::AxisMask all = (1u << shardproof::compact::kAxisCount) - 1;
  try {
    shardproof::compact::parse_affine(text, all);
  } catch (const shardproof::compact::ExprError&) {
  }
  try {
    shardproof::compact::parse_condition(text, all);
  } catch (const shardproof::compact::ExprError&) {
  }
  try {
    shardproof::compact::parse_template(text, all);
  } catch (const shardproof::compact::ExprError&) {
  }
  return 0;
}
