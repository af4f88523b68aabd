// A plan's schedule section (as read by the parser) decided and folded into
// its Report: a deadlock, a mismatched or an unmatched pair is a finding of
// kind "schedule", and makes an equivalent or unknown verdict not equivalent
// (exit 1) whatever the graphs prove.
#pragma once

#include <string>
#include <vector>

#include "engine/report/report.h"
#include "engine/schedule/schedule_check.h"

namespace shardproof::schedule {

// The section's JSON text (plan_detail::read_schedule_section) as schedules.
std::vector<RankSchedule> schedule_from_json(const std::string& text);

// Checks `schedule_json` ("" = no section: nothing to do) into `report`.
void add_schedule_verdict(const std::string& schedule_json, Report& report);

}  // namespace shardproof::schedule
