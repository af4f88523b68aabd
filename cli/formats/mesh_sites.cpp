#include "cli/formats/mesh_sites.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace shardproof::cli {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 9 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// An axis's position in mesh.axes, -1 when the mesh has none of that name.
int axis_index(const MeshShape& mesh, const std::string& name) {
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].name == name) return static_cast<int>(i);
  return -1;
}

// "0", "0,2" or "*" (every value of an axis of `size`).
std::string values_text(const std::set<int64_t>& values, int64_t size) {
  if (size > 1 && static_cast<int64_t>(values.size()) == size) return "*";
  std::string out;
  for (int64_t v : values) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

std::string ranks_text(const std::vector<MeshSite>& sites) {
  std::set<int64_t> ranks;
  for (const MeshSite& s : sites) ranks.insert(s.rank);
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  size_t shown = 0;
  for (int64_t r : ranks) {
    if (shown == 32) {
      out += " (+" + std::to_string(ranks.size() - shown) + " more)";
      break;
    }
    out += (shown++ ? ", " : "") + std::to_string(r);
  }
  return out;
}

// The grid's columns: every device axis but pp and tp (dp, and cp), so a
// column is one tp group, the group Megatron's collectives span.
std::vector<int> column_axes(const MeshShape& mesh) {
  std::vector<int> out;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    if (mesh.axes[i].name != "pp" && mesh.axes[i].name != "tp") out.push_back(static_cast<int>(i));
  return out;
}

// Rows and columns too many to read at a glance are not drawn.
constexpr int64_t kMaxPanelCells = 1024;

}  // namespace

int64_t MeshShape::world() const {
  int64_t w = 1;
  for (const MeshAxis& a : axes) w *= a.size;
  return w;
}

std::map<std::string, int64_t> name_coordinates(const std::string& name) {
  static const char* const kAxes[] = {"pp", "dp", "cp", "tp", "ep", "mb"};
  std::map<std::string, int64_t> out;
  std::istringstream parts(name);
  std::string part;
  while (std::getline(parts, part, '.')) {
    for (const char* axis : kAxes) {
      if (part.rfind(axis, 0) == 0 && all_digits(part.substr(2)) && !out.count(axis))
        out[axis] = std::stoll(part.substr(2));
    }
  }
  return out;
}

std::vector<int64_t> rank_coordinates(const MeshShape& mesh, int64_t rank) {
  if (rank < 0 || rank >= mesh.world()) return {};
  std::vector<int64_t> out(mesh.axes.size());
  for (size_t i = mesh.axes.size(); i-- > 0;) {
    out[i] = rank % mesh.axes[i].size;
    rank /= mesh.axes[i].size;
  }
  return out;
}

int64_t rank_of(const MeshShape& mesh, const std::map<std::string, int64_t>& coords) {
  if (!mesh.known()) return -1;
  int64_t rank = 0;
  for (const MeshAxis& a : mesh.axes) {
    auto it = coords.find(a.name);
    if (it == coords.end() || it->second < 0 || it->second >= a.size) return -1;
    rank = rank * a.size + it->second;
  }
  return rank;
}

std::string sites_text(const MeshShape& mesh, const std::vector<MeshSite>& sites) {
  if (sites.empty()) return "ranks not known";
  std::string out = ranks_text(sites);
  if (!mesh.known()) return out + " (the plan has no mesh information)";
  std::vector<std::set<int64_t>> values(mesh.axes.size());
  std::set<int64_t> mbs;
  bool per_device = false;
  for (const MeshSite& s : sites) {
    std::vector<int64_t> c = rank_coordinates(mesh, s.rank);
    for (size_t i = 0; i < c.size(); ++i) values[i].insert(c[i]);
    if (s.mb < 0)
      per_device = true;
    else
      mbs.insert(s.mb);
  }
  out += "; class";
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    out += " " + mesh.axes[i].name + "=" + values_text(values[i], mesh.axes[i].size);
  if (!mbs.empty()) out += " mb=" + values_text(mbs, mesh.microbatches);
  if (per_device) out += mbs.empty() ? " per device" : " and per device";
  return out;
}

namespace {

// Panel layout: rows are tp, columns the other device axes but pp (row-major).
struct PanelLayout {
  int pp = -1, tp = -1;
  std::vector<int> columns;
  int64_t row_count = 1, col_count = 1;

  explicit PanelLayout(const MeshShape& mesh)
      : pp(axis_index(mesh, "pp")), tp(axis_index(mesh, "tp")), columns(column_axes(mesh)) {
    if (tp >= 0) row_count = mesh.axes[tp].size;
    for (int a : columns) col_count *= mesh.axes[a].size;
  }
  int64_t column(const MeshShape& mesh, const std::vector<int64_t>& c) const {
    int64_t col = 0;
    for (int a : columns) col = col * mesh.axes[a].size + c[a];
    return col;
  }
  std::string column_label(const MeshShape& mesh, int64_t col) const {
    std::vector<std::string> parts(columns.size());
    for (size_t i = columns.size(); i-- > 0;) {
      parts[i] =
          mesh.axes[columns[i]].name + " " + std::to_string(col % mesh.axes[columns[i]].size);
      col /= mesh.axes[columns[i]].size;
    }
    std::string label;
    for (const std::string& part : parts) label += (label.empty() ? "" : " ") + part;
    return label.empty() ? "all" : label;
  }
};

using Cells = std::set<std::pair<int64_t, int64_t>>;  // (row, column)

// The micro-batches to draw for one stage: all (up to a few), else the failing ones.
std::vector<int64_t> panel_microbatches(
    const MeshShape& mesh, int64_t stage,
    const std::map<std::pair<int64_t, int64_t>, Cells>& marked) {
  std::vector<int64_t> mbs;
  if (mesh.microbatches <= kMaxMicrobatchPanels) {
    for (int64_t m = 0; m < mesh.microbatches; ++m) mbs.push_back(m);
  } else {
    for (const auto& [key, cells] : marked)
      if (key.first == stage && key.second >= 0) mbs.push_back(key.second);
  }
  if (marked.count({stage, -1})) mbs.push_back(-1);
  return mbs;
}

}  // namespace

std::vector<MeshPanel> mesh_panels(const MeshShape& mesh, const std::vector<MeshSite>& failing) {
  if (!mesh.known() || failing.empty()) return {};
  const PanelLayout layout(mesh);
  if (layout.row_count * layout.col_count > kMaxPanelCells) return {};
  std::map<std::pair<int64_t, int64_t>, Cells> marked;  // (stage, mb) -> failing cells
  std::set<int64_t> stages;
  for (const MeshSite& s : failing) {
    std::vector<int64_t> c = rank_coordinates(mesh, s.rank);
    if (c.empty()) continue;
    const int64_t stage = layout.pp < 0 ? 0 : c[layout.pp];
    const int64_t mb = mesh.microbatches == 1 ? 0 : s.mb;
    stages.insert(stage);
    marked[{stage, mb}].insert({layout.tp < 0 ? 0 : c[layout.tp], layout.column(mesh, c)});
  }
  std::vector<MeshPanel> out;
  for (int64_t stage : stages) {
    for (int64_t m : panel_microbatches(mesh, stage, marked)) {
      MeshPanel p;
      p.pp = stage;
      p.title = (layout.pp < 0 ? std::string() : "pp " + std::to_string(stage) + ", ") +
                (m < 0 ? std::string("per device") : "mb " + std::to_string(m));
      for (int64_t r = 0; r < layout.row_count; ++r) p.rows.push_back("tp " + std::to_string(r));
      for (int64_t c = 0; c < layout.col_count; ++c) p.cols.push_back(layout.column_label(mesh, c));
      for (int a : layout.columns)
        p.col_axes += (p.col_axes.empty() ? "" : ".") + mesh.axes[a].name;
      p.cells.assign(layout.row_count, std::vector<bool>(layout.col_count, false));
      for (const auto& [row, col] : marked[{stage, m}]) p.cells[row][col] = true;
      out.push_back(std::move(p));
    }
  }
  return out;
}

namespace {

// One panel's lines, each as wide as the widest: its title, the column header,
// then a row per tp rank.
std::vector<std::string> panel_lines(const MeshPanel& p) {
  size_t label = 0, cell = 1;
  for (const std::string& r : p.rows) label = std::max(label, r.size());
  for (size_t c = 0; c < p.cols.size(); ++c) cell = std::max(cell, std::to_string(c).size());
  auto padded = [](std::string s, size_t width, bool right) {
    std::string fill(width > s.size() ? width - s.size() : 0, ' ');
    return right ? fill + s : s + fill;
  };
  // The header names the column axes and numbers the columns.
  std::vector<std::string> lines = {p.title, padded(p.col_axes + " ", label + 4, true)};
  for (size_t c = 0; c < p.cols.size(); ++c)
    lines[1] += (c ? " " : "") + padded(std::to_string(c), cell, true);
  for (size_t r = 0; r < p.rows.size(); ++r) {
    std::string line = padded(p.rows[r], label, false) + "    ";
    for (size_t c = 0; c < p.cols.size(); ++c)
      line += (c ? " " : "") + padded(p.cells[r][c] ? "X" : ".", cell, true);
    lines.push_back(line);
  }
  size_t width = 0;
  for (const std::string& l : lines) width = std::max(width, l.size());
  for (std::string& l : lines) l = padded(l, width, false);
  return lines;
}

}  // namespace

std::string mesh_grid_text(const std::vector<MeshPanel>& panels, const std::string& indent) {
  std::string out;
  for (size_t i = 0; i < panels.size();) {
    // The panels of one pipeline stage, side by side.
    std::vector<std::vector<std::string>> row;
    size_t j = i;
    for (; j < panels.size() && panels[j].pp == panels[i].pp; ++j)
      row.push_back(panel_lines(panels[j]));
    size_t height = 0;
    for (const auto& lines : row) height = std::max(height, lines.size());
    for (size_t k = 0; k < height; ++k) {
      std::string line;
      for (size_t n = 0; n < row.size(); ++n) {
        const std::string blank(row[n][0].size(), ' ');
        line += (n ? "   " : "") + (k < row[n].size() ? row[n][k] : blank);
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += indent + line + "\n";
    }
    i = j;
  }
  return out;
}

}  // namespace shardproof::cli
