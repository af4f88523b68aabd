// `verify --output html=FILE`: one self-contained page (inline style, no
// script, nothing fetched) a reviewer opens from the CI artifacts: per plan
// the verdict, time per phase, the mesh grid of the failing stages, and per
// finding the ops of its stage, logical beside parallel.
#include <cstdio>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

std::string esc(std::string_view s) {
  return xml_escape(s, true);
}

const char* const kStyle = R"(
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1f2328;max-width:72em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:2em}code,pre{font:12px ui-monospace,monospace}
.verdict{display:inline-block;padding:.15em .6em;border-radius:.3em;color:#fff;font-weight:600}
.v-equivalent{background:#1a7f37}.v-unknown{background:#9a6700}
.v-not-equivalent,.v-invalid,.v-internal-error{background:#cf222e}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d0d7de;padding:.2em .5em;text-align:left;vertical-align:top}
.panels{display:flex;flex-wrap:wrap;gap:1.5em}
table.mesh th{white-space:nowrap}table.mesh td{width:1.6em;height:1.6em;text-align:center;padding:0}
table.mesh td.fail{background:#cf222e;color:#fff;font-weight:700}table.mesh td.ok{background:#dafbe1}
pre{background:#f6f8fa;padding:.5em;white-space:pre-wrap;word-break:break-all;margin:0}
.ops{display:grid;grid-template-columns:1fr 1fr;gap:1em}
)";

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f s", s);
  return buf;
}

std::string phases_table(const Stats& st) {
  const std::pair<const char*, double> rows[] = {
      {"parse", st.phases.parse}, {"infer claims", st.phases.infer}, {"cut", st.phases.cut},
      {"key", st.phases.key},     {"decide", st.phases.decide},      {"total", st.seconds}};
  std::string out = "<table class=\"phases\"><tr><th>phase</th><th>time</th></tr>";
  for (const auto& [name, s] : rows)
    out += "<tr><td>" + std::string(name) + "</td><td>" + seconds(s) + "</td></tr>";
  return out + "</table>";
}

std::string panel_table(const MeshPanel& p) {
  std::string out = "<table class=\"mesh\"><caption>" + esc(p.title) + "</caption><tr><th></th>";
  for (const std::string& c : p.cols) out += "<th>" + esc(c) + "</th>";
  out += "</tr>";
  for (size_t r = 0; r < p.rows.size(); ++r) {
    out += "<tr><th>" + esc(p.rows[r]) + "</th>";
    for (size_t c = 0; c < p.cols.size(); ++c) {
      const std::string where = p.title + ", " + p.rows[r] + ", " + p.cols[c];
      out += p.cells[r][c] ? "<td class=\"fail\" title=\"failing: " + esc(where) + "\">X</td>"
                           : "<td class=\"ok\" title=\"" + esc(where) + "\"></td>";
    }
    out += "</tr>";
  }
  return out + "</table>";
}

std::string mesh_html(const LocatedReport& located) {
  std::string out = "<h3>Where in the mesh</h3>";
  if (!located.mesh.known())
    out +=
        "<p>The plan has no mesh information (no <code>parallel.mesh</code>, and no meta "
        "pp/dp/tp sizes that multiply to world): ranks only.</p>";
  out += "<ul>";
  for (size_t i = 0; i < located.sites.size(); ++i)
    out += "<li>finding " + std::to_string(i + 1) + ": " +
           esc(sites_text(located.mesh, located.sites[i])) + "</li>";
  out += "</ul><div class=\"panels\">";
  for (const MeshPanel& p : mesh_panels(located.mesh, failing_sites(located)))
    out += panel_table(p);
  return out + "</div>";
}

std::string ops_column(const char* title, const std::vector<std::string>& ops) {
  std::string out = "<div><h4>" + std::string(title) + "</h4>";
  if (ops.empty()) out += "<p>(not found in the plan)</p>";
  for (const std::string& op : ops) out += "<pre>" + esc(op) + "</pre>";
  return out + "</div>";
}

std::string finding_html(const LocatedReport& located, size_t i) {
  const Finding& f = located.report.findings[i];
  const SourceLocation& at = located.findings[i];
  std::string out = "<h3>Finding " + std::to_string(i + 1) + ": " + esc(f.kind) +
                    (f.stage.empty() ? "" : " in " + esc(f.stage)) + "</h3>";
  out += "<p>" + esc(f.message) + "</p><p>at <code>" + esc(at.file) +
         (at.line > 0 ? ":" + std::to_string(at.line) : "") + "</code>; logical tensor <code>" +
         esc(f.tensor) + "</code></p>";
  if (i < located.ops.size())
    out += "<div class=\"ops\">" + ops_column("logical", located.ops[i].logical) +
           ops_column("parallel", located.ops[i].parallel) + "</div>";
  out += "<pre>" + esc(finding_to_text(f)) + "</pre>";
  return out;
}

std::string plan_html(const LocatedReport& located) {
  const Report& r = located.report;
  std::string out = "<section class=\"plan\"><h2><span class=\"verdict v-" +
                    std::string(verdict_name(r.verdict)) + "\">" + verdict_name(r.verdict) +
                    "</span> " + esc(r.plan_path.empty() ? r.plan_name : r.plan_path) + "</h2>";
  out += "<p class=\"headline\">" + esc(report_headline(r)) + "</p>";
  if (r.verdict == Verdict::Invalid || r.verdict == Verdict::InternalError)
    out += "<pre>" + esc(report_to_text(r)) + "</pre>";
  out += "<h3>Time per phase</h3>" + phases_table(r.stats);
  if (!r.findings.empty()) out += mesh_html(located);
  for (size_t i = 0; i < r.findings.size(); ++i) out += finding_html(located, i);
  return out + "</section>";
}

}  // namespace

std::string render_html(const std::vector<LocatedReport>& reports) {
  Verdict worst = Verdict::Equivalent;
  for (const LocatedReport& r : reports)
    if (verdict_severity(r.report.verdict) > verdict_severity(worst)) worst = r.report.verdict;
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\"><title>shardproof: " +
      std::string(verdict_name(worst)) + "</title><style>" + kStyle + "</style></head><body>";
  out += "<h1>shardproof " + std::string(SHARDPROOF_VERSION) + ": <span class=\"verdict v-" +
         verdict_name(worst) + "\" id=\"verdict\">" + verdict_name(worst) + "</span></h1>";
  for (const LocatedReport& r : reports) out += plan_html(r);
  return out + "</body></html>\n";
}

}  // namespace shardproof::cli
