// Where a report's problems are in the plan's files, for the CI formats:
// a captured plan's finding at the user's source line (Finding::sources),
// else the line of the parallel op that produced it (what a reviewer edits),
// else its parallel tensor's, else its logical tensor's declaration. The
// logical tensor's declaration is kept apart too (SARIF's related location). The Report itself
// carries names only (it crosses the daemon's socket and the cache that way), so this is a pass
// over the plan's text with the positions jsonsrc keeps, run only for
// reports with findings.
#pragma once

#include <string>
#include <vector>

#include "cli/formats/mesh_sites.h"
#include "engine/report/report.h"

namespace shardproof::cli {

struct SourceLocation {
  std::string file;  // the plan as given on the command line, or a graph file it references
  int line = 0;      // 1-based; 0: unknown (the file as a whole)
  int column = 0;    // 1-based, in code points; 0: unknown
};

// A finding's ops as the plan writes them (compact JSON, one per op): the
// logical op that produces its logical tensor, and its parallel ops.
struct FindingOps {
  std::vector<std::string> logical, parallel;
};

struct LocatedReport {
  Report report;
  // Where the verdict belongs: the plan at line 1; an invalid plan's
  // diagnostic place; the file alone (line 0) for an internal error.
  SourceLocation plan;
  std::vector<SourceLocation> findings;  // one per report.findings
  // One per report.findings: where its logical tensor is declared (file
  // empty when it is not found, or the plan was not read).
  std::vector<SourceLocation> logical_tensors;
  // The plan's mesh, and per finding where it fails in it (mesh_sites.h):
  // the ranks (and micro-batches) of its parallel tensors, else of its ops.
  MeshShape mesh;
  std::vector<std::vector<MeshSite>> sites;
  std::vector<FindingOps> ops;  // one per report.findings (empty when not found)
};

// `plan_text` is the plan as it was read (null when it could not be). A
// finding whose names are not declared where expected points at line 1 of
// the plan. Graph files the plan references are read relative to it.
// `captured`: the text is of a plan captured from the harness the report
// names (report.plan_path), kept nowhere: it gives the ranks and the mesh of
// findings, never a line (a finding without a source of its own points at
// the harness's first line).
LocatedReport locate_report(Report report, const std::string* plan_text, bool captured = false);

}  // namespace shardproof::cli
