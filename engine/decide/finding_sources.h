// Where a captured plan's findings are in the user's program: the "src" of
// the ops a finding names. Findings name ops (stored verdicts hold names
// only, and "src" is never part of a stage key), so the sources are looked
// up in the plan being verified, after its stages are decided: a verdict
// shared with another plan still points at this plan's lines.
#pragma once

#include "engine/core/ir.h"
#include "engine/report/report.h"

namespace shardproof {

// Fills Finding::sources of every finding of `report` from `plan`; a plan
// without "src" leaves them empty.
void attach_sources(const Plan& plan, Report& report);

}  // namespace shardproof
