// Reads a plan file (format v1), follows graph-file references, checks every
// rule of plan-format-v1.md and builds the IR. Nothing is solved here.
#pragma once

#include <optional>
#include <string>

#include "engine/core/diagnostic.h"
#include "engine/core/ir.h"

namespace shardproof {

// How a compact (1.1) plan is read: Auto expands it unless the expansion is
// too large (compact::kMaxInstances), then keeps it for the class verifier;
// Expand always expands (and refuses what is too large); Classes never does.
struct ParseOptions {
  enum class Compact { Auto, Expand, Classes } compact = Compact::Auto;
};

struct ParseResult {
  std::optional<Plan> plan;         // set on success
  std::optional<Diagnostic> error;  // set on an invalid plan
  std::string io_error;             // set when a file could not be read (exit 4)
};

// `path` is the plan file; graph references are resolved relative to it.
ParseResult parse_plan_file(const std::string& path, ParseOptions options = {});
// Parses plan text held in memory; `base_dir` resolves graph references
// and `display_name` names the text in messages.
ParseResult parse_plan_text(const std::string& text, const std::string& display_name,
                            const std::string& base_dir, ParseOptions options = {});

}  // namespace shardproof
