// What a long-lived verifier (the daemon) keeps of the last verification of
// a plan, so that verifying its next edit re-reads only the edited ops
// (plan_revision.h) and re-decides only the stages they reach
// (verify_plan_edit). Anything that is not such an edit is read and verified
// in full, and the memo then describes that text.
#pragma once

#include <optional>
#include <string>

#include "engine/format/plan_revision.h"
#include "engine/report/report.h"
#include "engine/verifier.h"

namespace shardproof {

struct PlanMemo {
  std::optional<ParsedPlanText> parsed;  // the last valid text with an outline
  StageRecord stages;                    // its stages

  void clear() {
    parsed.reset();
    stages = StageRecord{};
  }
};

// Reads and verifies a self-contained plan `text` (no graph files) named
// `path` in the report: as an edit of the memo's text when it is one, else in
// full. The report is the one a full read and verification would give, but
// for stats.reused and the time; afterwards the memo holds this text, or is
// empty when the text is invalid or cannot be outlined.
Report verify_text_with_memo(const std::string& path, std::string text,
                             const VerifyOptions& options, PlanMemo& memo);

}  // namespace shardproof
