// Re-reading an edited plan op by op. Tuning a plan (swapping an activation,
// changing a collective's attributes) edits a few op elements of a text of
// tens of megabytes; reading all of it again costs more than verifying the
// edit. A ParsedPlanText keeps a parsed plan with its text, and a new text
// that differs from it only inside op elements is read by parsing and
// checking just those elements.
//
// Sound by construction: the new text's bytes outside the op elements equal
// the old text's, so they mean what they meant; each differing element is
// read by the full parser's own reader and op rules, and must keep the
// op's name, inputs, outputs, group and rank, so every rule that spans ops
// (names, SSA, acyclicity, lineage) still holds as the full read found it.
// The one plan-wide rule that reads op contents (map arity) is checked
// again. Anything else is refused, and the caller reads the text in full.
#pragma once

#include <string>
#include <vector>

#include "engine/core/ir.h"
#include "engine/format/plan_outline.h"

namespace shardproof {

struct ParsedPlanText {
  std::string text;
  PlanOutline outline;
  Plan plan;
};

// A text the full parser accepted as `plan`, with its outline; nullopt when
// the text has no outline (graph files, escaped keys): it cannot be re-read
// op by op.
std::optional<ParsedPlanText> keep_parsed_text(std::string text, Plan plan);

// The ops an edit changed, by index, in each graph.
struct OpEdits {
  std::vector<int> logical, parallel;
  bool empty() const { return logical.empty() && parallel.empty(); }
};

// Reads `text` as an edit of `previous`. On success `previous` becomes the
// new text's plan, edited in place (a plan is large), its text swapped with
// `text` (which then holds the old one), and the changed ops are returned.
// nullopt when the edit is not op contents alone or an edited op breaks a
// rule; `previous` and `text` are then as they were.
std::optional<OpEdits> reread_edited(ParsedPlanText& previous, std::string& text);

}  // namespace shardproof
