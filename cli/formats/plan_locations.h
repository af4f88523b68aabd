// Where a report's problems are in the plan's files, for the CI formats:
// a captured plan's finding at the user's source line (Finding::sources),
// else the line that declares a finding's logical tensor (else its parallel
// op, else its parallel tensor). The Report itself carries names only (it
// crosses the daemon's socket and the cache that way), so this is a pass
// over the plan's text with the positions jsonsrc keeps, run only for
// reports with findings.
#pragma once

#include <string>
#include <vector>

#include "engine/report/report.h"

namespace shardproof::cli {

struct SourceLocation {
  std::string file;  // the plan as given on the command line, or a graph file it references
  int line = 0;      // 1-based; 0: unknown (the file as a whole)
  int column = 0;    // 1-based, in code points; 0: unknown
};

struct LocatedReport {
  Report report;
  // Where the verdict belongs: the plan at line 1; an invalid plan's
  // diagnostic place; the file alone (line 0) for an internal error.
  SourceLocation plan;
  std::vector<SourceLocation> findings;  // one per report.findings
};

// `plan_text` is the plan as it was read (null when it could not be). A
// finding whose names are not declared where expected points at line 1 of
// the plan. Graph files the plan references are read relative to it.
LocatedReport locate_report(Report report, const std::string* plan_text);

}  // namespace shardproof::cli
