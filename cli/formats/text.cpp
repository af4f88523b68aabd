// `verify --format text` with the plan at hand: the engine's text report,
// then where its findings sit in the mesh (mesh_sites.h).
#include <set>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

std::string mesh_title(const MeshShape& mesh) {
  std::string out;
  for (const MeshAxis& a : mesh.axes)
    out += (out.empty() ? "" : " x ") + a.name + " " + std::to_string(a.size);
  if (mesh.microbatches > 1) out += ", " + std::to_string(mesh.microbatches) + " micro-batches";
  return out + "; from " + mesh.source;
}

}  // namespace

std::vector<MeshSite> failing_sites(const LocatedReport& located) {
  std::set<MeshSite> all;
  for (const std::vector<MeshSite>& sites : located.sites) all.insert(sites.begin(), sites.end());
  return {all.begin(), all.end()};
}

std::string mesh_section(const LocatedReport& located) {
  const Report& r = located.report;
  if (r.findings.empty() || located.sites.size() != r.findings.size()) return "";
  // Nothing known (the plan was not read, e.g. captured from a harness): nothing to say.
  const std::vector<MeshSite> failing = failing_sites(located);
  if (!located.mesh.known() && failing.empty()) return "";
  std::string out = "  where in the mesh";
  out += located.mesh.known() ? " (" + mesh_title(located.mesh) + "):\n"
                              : ": the plan has no mesh information (no parallel.mesh, and no "
                                "meta pp/dp/tp sizes that multiply to world)\n";
  for (size_t i = 0; i < r.findings.size(); ++i)
    out += "    finding " + std::to_string(i + 1) + ": " +
           sites_text(located.mesh, located.sites[i]) + "\n";
  std::vector<MeshPanel> panels = mesh_panels(located.mesh, failing);
  if (!panels.empty()) out += "    X failing, . fine:\n" + mesh_grid_text(panels, "    ");
  return out;
}

std::string located_summary(const LocatedReport& located, size_t i) {
  std::string out = finding_summary(located.report.findings.at(i));
  if (i < located.sites.size() && !located.sites[i].empty())
    out += " [" + sites_text(located.mesh, located.sites[i]) + "]";
  return out;
}

std::string render_text(const LocatedReport& located) {
  return report_to_text(located.report) + mesh_section(located);
}

}  // namespace shardproof::cli
