// The CI renderings of `verify`'s reports: GitHub Actions workflow commands,
// JUnit XML and SARIF 2.1.0 (docs/cli.md). They render the same Report the
// text and JSON outputs render, plus where each problem is in the plan's
// files (plan_locations.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "cli/formats/plan_locations.h"

namespace shardproof::cli {

// The text report (report_to_text), then where the findings are in the
// mesh: each finding's ranks and coordinate class, and the grid of the
// failing pipeline stages (mesh_sites.h).
std::string render_text(const LocatedReport& report);
// That last part alone ("" without findings), and the sites it marks.
std::string mesh_section(const LocatedReport& report);
std::vector<MeshSite> failing_sites(const LocatedReport& report);

// finding_summary of finding `i`, then its ranks and coordinate class when
// they are known (what an annotation, a SARIF result or a JUnit failure says).
std::string located_summary(const LocatedReport& report, size_t i);

// GitHub shows at most 10 error and 10 warning annotations per step.
inline constexpr size_t kGithubAnnotationLimit = 10;

// Workflow commands for the plans of one step: per plan its verdict line,
// then one `::error` per finding (`::warning` for an undecided one), invalid
// plan or internal error, while the step's budget of annotations lasts;
// past it, the same problem as a plain log line. finish() ends the step
// with one `::notice` counting those (empty when there were none).
class GithubAnnotations {
 public:
  explicit GithubAnnotations(size_t limit = kGithubAnnotationLimit) : limit_(limit) {}
  std::string render(const LocatedReport& report);  // ends with "\n"
  std::string finish();

 private:
  std::string annotate(const char* level, const SourceLocation& where, const std::string& title,
                       const std::string& message);
  size_t limit_, shown_ = 0, held_back_ = 0;
};

// One plan as a step of its own (render, then finish).
std::string render_github(const LocatedReport& report);

// The Markdown `verify` appends to $GITHUB_STEP_SUMMARY: the verdict of
// each plan, then a table of the findings (plan, kind, stage, tensor, where,
// mesh), and the other problems.
std::string render_step_summary(const std::vector<LocatedReport>& reports);

// A <testsuites> document with one <testsuite> per plan: a test case for the
// plan's verdict and one per stage that failed.
std::string render_junit(const std::vector<LocatedReport>& reports);

// A self-contained HTML page (no external resources): per plan its verdict,
// time per phase, the mesh grid and each finding's ops, logical beside
// parallel.
std::string render_html(const std::vector<LocatedReport>& reports);

// Escaped for XML or HTML: an attribute value (in double quotes) or element
// text. Bytes that are not UTF-8 and characters XML forbids become U+FFFD:
// messages may quote a garbage plan. In attributes, tab and line breaks are
// character references, or a parser would normalise them to spaces.
std::string xml_escape(std::string_view s, bool attribute);

// A SARIF 2.1.0 log with one run: one result per finding, invalid plan or
// internal error, located in the plan's files.
std::string render_sarif(const std::vector<LocatedReport>& reports);

}  // namespace shardproof::cli
