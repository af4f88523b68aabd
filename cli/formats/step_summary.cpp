// The Markdown `verify` appends to $GITHUB_STEP_SUMMARY (GitHub shows it on
// the run's summary page): one verdict line per plan, then a table of every
// finding, so a reviewer sees them all even past the 10 annotations.
#include <string_view>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

// A table cell: "|" would end it and a newline would end the row.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

std::string place(const SourceLocation& where) {
  std::string out = "`" + where.file;
  if (where.line > 0) out += ":" + std::to_string(where.line);
  return cell(out + "`");
}

const char* verdict_mark(Verdict v) {
  switch (v) {
    case Verdict::Equivalent:
      return "✅";
    case Verdict::Unknown:
      return "⚠️";
    default:
      return "❌";
  }
}

std::string findings_table(const std::vector<LocatedReport>& reports) {
  std::string out =
      "| plan | kind | stage | logical tensor | where | ranks | finding |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const LocatedReport& located : reports) {
    const Report& r = located.report;
    for (size_t i = 0; i < r.findings.size(); ++i) {
      const Finding& f = r.findings[i];
      std::string ranks =
          i < located.sites.size() ? sites_text(located.mesh, located.sites[i]) : "";
      out += "| " + cell(r.plan_path.empty() ? r.plan_name : r.plan_path) + " | " + cell(f.kind) +
             " | " + cell(f.stage) + " | `" + cell(f.tensor) + "` | " + place(located.findings[i]) +
             " | " + cell(ranks) + " | " + cell(f.message) + " |\n";
    }
  }
  return out;
}

}  // namespace

std::string render_step_summary(const std::vector<LocatedReport>& reports) {
  std::string out = "### shardproof\n\n";
  size_t findings = 0;
  for (const LocatedReport& located : reports) {
    const Report& r = located.report;
    out += "- " + std::string(verdict_mark(r.verdict)) + " " + cell(report_headline(r)) + "\n";
    if (r.verdict == Verdict::Invalid && r.invalid)
      out += "  - invalid plan at " + place(located.plan) + ": [" + cell(r.invalid->rule) + "] " +
             cell(r.invalid->message) + "\n";
    else if (r.verdict == Verdict::InternalError)
      out += "  - " + cell(r.error) + "\n";
    findings += r.findings.size();
  }
  if (findings > 0) out += "\n" + findings_table(reports);
  return out + "\n";
}

}  // namespace shardproof::cli
