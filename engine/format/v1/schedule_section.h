// The plan's optional "schedule" section: the per-rank order of the
// pipeline's point-to-point operations (docs/plan-format.md, "Pipeline
// schedules"). Checked here for its form; engine/schedule decides it.
#pragma once

#include <string>

#include "engine/format/v1/plan_validation.h"

namespace shardproof::plan_detail {

// Checks `node` (rule "schedule": one list of steps per rank of a world of
// `world` ranks, each step a list of {"send"|"recv": peer, "tensor": name}
// with peer another rank) and returns it as compact JSON text.
std::string read_schedule_section(const Node& node, int world);

}  // namespace shardproof::plan_detail
