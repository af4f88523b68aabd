// The inverse of engine's report_to_json: a Report rebuilt from its JSON, so a
// report that crossed the daemon's socket or was stored in the cache renders
// exactly like one made in this process.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "engine/report/report.h"

namespace shardproof {

// nullopt when `j` is not a report in the shape report_to_json writes.
std::optional<Report> report_from_json(const nlohmann::json& j);

}  // namespace shardproof
