// The plan-wide lineage rules (plan-format.md, "Lineage": rules 1 to 4) for a
// compact plan the class verifier keeps unexpanded. Each claim template is
// enumerated only over the axes its claim and its conditions mention (every
// other axis changes nothing the rules read), so the work does not grow
// with dp or the micro-batch count when a claim does not depend on them.
#pragma once

#include <optional>

#include "engine/core/ir.h"
#include "engine/report/report.h"

namespace shardproof {

// An invalid or unknown report when a rule is broken (or too costly to
// check), else nothing. `plan.compact` must be set.
std::optional<Report> check_compact_rules(const Plan& plan);

}  // namespace shardproof
