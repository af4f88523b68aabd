// Where a finding sits in the device mesh (docs/cli.md, "Where in the
// mesh"): the ranks and micro-batches of the parallel tensors it names, the
// coordinate class they span, and the grid the text and HTML reports draw
// (per pipeline stage, dp x tp, one panel per micro-batch). The mesh comes
// from the plan itself: a compact plan's `parallel.mesh`, or the sizes a
// generated plan records in `meta` (pp, dp, cp, tp, microbatches) when they
// multiply to `world`. A plan with neither has no mesh: its findings list
// ranks only, and nothing is drawn.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shardproof::cli {

struct MeshAxis {
  std::string name;  // pp, dp, cp, tp or ep
  int64_t size = 1;
};

struct MeshShape {
  std::vector<MeshAxis> axes;  // device axes, slowest first: ranks are row-major
  int64_t microbatches = 1;
  std::string source;  // "parallel.mesh", "meta.mesh" or "meta"; empty: no mesh
  bool known() const { return !source.empty(); }
  int64_t world() const;
};

// One failing place: a rank, and the micro-batch (-1: per device, i.e. the
// tensor is not per micro-batch or its name does not say which).
struct MeshSite {
  int64_t rank = -1;
  int64_t mb = -1;
  auto operator<=>(const MeshSite&) const = default;
};

// The coordinates a generated name spells: "dp1.tp0.pp0.mb2.x" -> dp 1,
// tp 0, pp 0, mb 2 (dot-separated parts of the form AXIS<digits>).
std::map<std::string, int64_t> name_coordinates(const std::string& name);
// A rank's coordinate on each of mesh.axes; empty when out of range.
std::vector<int64_t> rank_coordinates(const MeshShape& mesh, int64_t rank);
// The rank of `coords` when they give every device axis, else -1.
int64_t rank_of(const MeshShape& mesh, const std::map<std::string, int64_t>& coords);

// "ranks 0, 1; class pp=0 dp=0 tp=* mb=0" (an axis every value of which
// fails is "*"); without a mesh: "ranks 0, 1 (the plan has no mesh
// information)"; no site at all: "ranks not known".
std::string sites_text(const MeshShape& mesh, const std::vector<MeshSite>& sites);

// One panel of the grid: a pipeline stage's ranks at one micro-batch.
struct MeshPanel {
  int64_t pp = 0;
  std::string title;                     // "pp 0, mb 1", "pp 0, per device"
  std::vector<std::string> rows, cols;   // "tp 0"; "dp 0" (and "cp 1"): a column is a tp group
  std::string col_axes;                  // "dp", "dp.cp": what the columns number
  std::vector<std::vector<bool>> cells;  // [row][col]: failing
};

// The panels of the pipeline stages that hold a failing site: every
// micro-batch (at most kMaxMicrobatchPanels, then the failing ones only)
// and "per device" when a site has no micro-batch; rows are tp, columns dp
// (and cp): a column is one tp group. Empty without a mesh.
inline constexpr int64_t kMaxMicrobatchPanels = 8;
std::vector<MeshPanel> mesh_panels(const MeshShape& mesh, const std::vector<MeshSite>& failing);

// The panels as text, side by side per pipeline stage, "X" failing and "."
// fine; every line starts with `indent`.
std::string mesh_grid_text(const std::vector<MeshPanel>& panels, const std::string& indent);

}  // namespace shardproof::cli
