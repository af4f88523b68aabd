// The CI renderings of `verify`'s reports: GitHub Actions workflow commands,
// JUnit XML and SARIF 2.1.0 (docs/cli.md). They render the same Report the
// text and JSON outputs render, plus where each problem is in the plan's
// files (plan_locations.h).
#pragma once

#include <string>
#include <vector>

#include "cli/formats/plan_locations.h"

namespace shardproof::cli {

// One plan: its verdict line, then one `::error` per finding (`::warning`
// for an undecided one), invalid plan or internal error. Ends with "\n".
std::string render_github(const LocatedReport& report);

// A <testsuites> document with one <testsuite> per plan: a test case for the
// plan's verdict and one per stage that failed.
std::string render_junit(const std::vector<LocatedReport>& reports);

// A SARIF 2.1.0 log with one run: one result per finding, invalid plan or
// internal error, located in the plan's files.
std::string render_sarif(const std::vector<LocatedReport>& reports);

}  // namespace shardproof::cli
