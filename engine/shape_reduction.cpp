#include "engine/shape_reduction.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "engine/op_registry.h"

namespace shardproof {
namespace {

// Union-find over axes with offsets: position p on an axis is position
// p + offset on its root line.
class AxisLines {
 public:
  explicit AxisLines(const Stage& stage) {
    for (const StageTensor& t : stage.tensors) {
      base_.push_back(static_cast<int>(parent_.size()));
      for (int64_t len : t.full_shape) {
        parent_.push_back(static_cast<int>(parent_.size()));
        offset_.push_back(0);
        length_.push_back(len);
      }
    }
  }

  int axis(int tensor, int dim) const { return base_[tensor] + dim; }
  int count() const { return static_cast<int>(parent_.size()); }
  int64_t length(int a) const { return length_[a]; }

  // Root line of axis a and the offset of a's positions on it. Stages are
  // small, so no path compression.
  std::pair<int, int64_t> find(int a) const {
    int64_t total = 0;
    while (parent_[a] != a) {
      total += offset_[a];
      a = parent_[a];
    }
    return {a, total};
  }

  // whole position = part position + offset.
  void relate(int part, int whole, int64_t offset) {
    auto [rp, op] = find(part);
    auto [rw, ow] = find(whole);
    int64_t delta = offset + ow - op;  // root(part) position -> root(whole) position
    if (rp == rw) {
      if (delta != 0) conflicted_.insert(rp);
      return;
    }
    parent_[rp] = rw;
    offset_[rp] = delta;
  }

  void freeze(int a) { frozen_axes_.insert(a); }
  void mark_broadcast(int a) { broadcast_axes_.insert(a); }
  void mark_combined(int a) { combined_axes_.insert(a); }

  // Roots of lines that must keep full size: frozen by an operator, related
  // at two different offsets (a shift we do not reason about), or both
  // broadcast and combined (a count of repeated values).
  std::set<int> frozen_roots() const {
    std::set<int> roots;
    for (int a : frozen_axes_) roots.insert(find(a).first);
    for (int c : conflicted_) roots.insert(find(c).first);
    std::set<int> broadcast_roots;
    for (int a : broadcast_axes_) broadcast_roots.insert(find(a).first);
    for (int a : combined_axes_)
      if (broadcast_roots.count(find(a).first)) roots.insert(find(a).first);
    return roots;
  }

 private:
  std::vector<int> base_;
  std::vector<int> parent_;
  std::vector<int64_t> offset_;
  std::vector<int64_t> length_;
  std::set<int> conflicted_;
  std::set<int> frozen_axes_;
  std::set<int> broadcast_axes_;
  std::set<int> combined_axes_;
};

// Piecewise map of one line: boundaries (full positions) -> reduced positions.
struct LineMap {
  std::vector<int64_t> bounds;   // full positions, sorted, unique
  std::vector<int64_t> reduced;  // reduced position of each bound

  int64_t map(int64_t p) const {
    auto it = std::lower_bound(bounds.begin(), bounds.end(), p);
    if (it == bounds.end() || *it != p)
      throw std::logic_error("position " + std::to_string(p) + " is not a boundary");
    return reduced[it - bounds.begin()];
  }
  // Full position of reduced position g (inside a piece: its first elements).
  int64_t unmap(int64_t g) const {
    auto it = std::upper_bound(reduced.begin(), reduced.end(), g);
    size_t j = (it - reduced.begin()) - 1;
    return bounds[j] + (g - reduced[j]);
  }
};

class AxisRelationsImpl : public AxisRelations {
 public:
  AxisRelationsImpl(AxisLines& lines, const StageOp& op) : lines_(lines), op_(op) {}
  void same(AxisRef a, AxisRef b) override { lines_.relate(axis(a), axis(b), 0); }
  void sub_range(AxisRef part, AxisRef whole, int64_t offset) override {
    lines_.relate(axis(part), axis(whole), offset);
  }
  void freeze(AxisRef a) override { lines_.freeze(axis(a)); }
  void broadcast(AxisRef a) override { lines_.mark_broadcast(axis(a)); }
  void combine(AxisRef a) override { lines_.mark_combined(axis(a)); }

 private:
  int axis(AxisRef r) const {
    int n_in = static_cast<int>(op_.in.size());
    int tensor = r.slot < n_in ? op_.in[r.slot] : op_.out[r.slot - n_in];
    return lines_.axis(tensor, r.dim);
  }
  AxisLines& lines_;
  const StageOp& op_;
};

std::vector<TensorInfo> infos(const Stage& s, const std::vector<int>& ids, bool full) {
  std::vector<TensorInfo> out;
  for (int t : ids)
    out.push_back({full ? s.tensors[t].full_shape : s.tensors[t].shape, s.tensors[t].dtype});
  return out;
}

// One reduction attempt with the given extra frozen tensors. Returns the op
// index whose reduced shapes do not check (-1 on success, -2 for lineage).
int attempt(const Stage& original, const std::set<int>& frozen_tensors, Stage& result) {
  const OpRegistry& registry = OpRegistry::instance();
  AxisLines lines(original);
  for (const StageOp& op : original.ops) {
    const OpDef* def = registry.find(op.op);
    AxisRelationsImpl rel(lines, op);
    def->relate_axes(op.attrs, infos(original, op.in, true), infos(original, op.out, true), rel);
  }
  for (size_t t = 0; t < original.tensors.size(); ++t) {
    const StageTensor& st = original.tensors[t];
    if (st.of && st.logical_index >= 0)
      for (size_t d = 0; d < st.full_shape.size(); ++d)
        lines.relate(lines.axis(t, d), lines.axis(st.logical_index, d), st.of->slice[d].first);
    if (frozen_tensors.count(static_cast<int>(t)))
      for (size_t d = 0; d < st.full_shape.size(); ++d) lines.freeze(lines.axis(t, d));
  }

  // Boundaries per line.
  std::map<int, std::set<int64_t>> bounds;
  std::vector<std::pair<int, int64_t>> where(lines.count());
  for (int a = 0; a < lines.count(); ++a) {
    where[a] = lines.find(a);
    bounds[where[a].first].insert(where[a].second);
    bounds[where[a].first].insert(where[a].second + lines.length(a));
  }
  std::map<int, LineMap> maps;
  std::set<int> frozen_roots = lines.frozen_roots();
  for (auto& [root, set] : bounds) {
    bool frozen = frozen_roots.count(root) > 0;
    LineMap m;
    m.bounds.assign(set.begin(), set.end());
    int64_t r = 0;
    for (size_t j = 0; j < m.bounds.size(); ++j) {
      if (j > 0) {
        int64_t len = m.bounds[j] - m.bounds[j - 1];
        r += frozen ? len : std::min<int64_t>(len, 2);
      }
      m.reduced.push_back(r);
    }
    maps[root] = std::move(m);
  }
  auto map_axis = [&](int a, int64_t p) {
    const LineMap& m = maps.at(where[a].first);
    return m.map(where[a].second + p) - m.map(where[a].second);
  };

  result = original;
  for (size_t t = 0; t < original.tensors.size(); ++t) {
    StageTensor& st = result.tensors[t];
    for (size_t d = 0; d < st.full_shape.size(); ++d) {
      int a = lines.axis(t, d);
      st.shape[d] = map_axis(a, st.full_shape[d]);
      const LineMap& m = maps.at(where[a].first);
      int64_t start = m.map(where[a].second);
      std::vector<int64_t>& positions = result.full_position[t][d];
      positions.resize(st.shape[d]);
      for (int64_t q = 0; q < st.shape[d]; ++q) positions[q] = m.unmap(start + q) - where[a].second;
    }
    if (st.of && st.logical_index >= 0)
      for (size_t d = 0; d < st.full_shape.size(); ++d) {
        int la = lines.axis(st.logical_index, d);
        auto& range = st.of->slice[d];
        range = {map_axis(la, range.first), map_axis(la, range.second)};
        if (range.second - range.first != st.shape[d]) return -2;
      }
  }
  for (size_t d = 0; d < result.slice.size(); ++d) {
    int la = lines.axis(result.target, d);
    result.slice[d] = {map_axis(la, result.slice[d].first), map_axis(la, result.slice[d].second)};
  }
  for (size_t i = 0; i < result.ops.size(); ++i) {
    StageOp& op = result.ops[i];
    const OpDef* def = registry.find(op.op);
    std::vector<Shape> red_in, red_out;
    for (int t : op.in) red_in.push_back(result.tensors[t].shape);
    for (int t : op.out) red_out.push_back(result.tensors[t].shape);
    int n_in = static_cast<int>(op.in.size());
    PositionMap position = [&](AxisRef r, int64_t p) {
      int t = r.slot < n_in ? op.in[r.slot] : op.out[r.slot - n_in];
      return map_axis(lines.axis(t, r.dim), p);
    };
    op.attrs = def->reduce_attrs(op.attrs, red_in, red_out, position);
    std::vector<TensorInfo> out;
    if (!def->infer(op.attrs, infos(result, op.in, false), op.out.size(), out).empty())
      return static_cast<int>(i);
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].shape != result.tensors[op.out[k]].shape) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

void reduce_stage(Stage& stage) {
  std::set<int> frozen;
  for (int round = 0; round < 16; ++round) {
    Stage result;
    int failed;
    try {
      failed = attempt(stage, frozen, result);
    } catch (const std::exception& e) {
      failed = -3;
    }
    if (failed == -1) {
      result.reduced = true;
      if (!frozen.empty())
        result.reduction_note = "some axes kept full size: reduced shapes did not check";
      stage = std::move(result);
      return;
    }
    if (failed < 0) break;  // lineage or unmappable position: give up reducing
    size_t before = frozen.size();
    for (int t : stage.ops[failed].in) frozen.insert(t);
    for (int t : stage.ops[failed].out) frozen.insert(t);
    if (frozen.size() == before) break;
  }
  stage.reduction_note = "kept full sizes: no sound reduction found";
}

}  // namespace shardproof
