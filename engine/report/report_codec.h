// A Report as JSON and back: the JSON report of `--format json` (schema in
// docs/cli.md), and the same JSON rebuilt into a Report, so a report that
// crossed the daemon's socket or was stored in the cache renders exactly
// like one made in this process.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "engine/report/report.h"

namespace shardproof {

// {"verdict", "findings", "stats", "plan", ...}: see docs/cli.md.
nlohmann::json report_to_json(const Report& report);

// nullopt when `j` is not a report in the shape report_to_json writes.
std::optional<Report> report_from_json(const nlohmann::json& j);

}  // namespace shardproof
