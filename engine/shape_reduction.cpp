#include "engine/shape_reduction.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "engine/op_registry.h"

namespace shardproof {
namespace {

// Union-find over axes with offsets: position p on an axis is position
// p + offset on its root line. Virtual nodes stand for the major factor of a
// product line and for groups of minor factors.
class AxisLines {
 public:
  explicit AxisLines(const Stage& stage) {
    for (const StageTensor& t : stage.tensors) {
      base_.push_back(static_cast<int>(parent_.size()));
      for (int64_t len : t.full_shape) add_node(len);
    }
  }

  int axis(int tensor, int dim) const { return base_[tensor] + dim; }
  int count() const { return static_cast<int>(parent_.size()); }
  int64_t length(int a) const { return length_[a]; }
  int add_node(int64_t length) {
    parent_.push_back(static_cast<int>(parent_.size()));
    offset_.push_back(0);
    length_.push_back(length);
    return static_cast<int>(parent_.size()) - 1;
  }

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

  // whole position = part position + offset. Returns true when two lines merged.
  bool relate(int part, int whole, int64_t offset) {
    auto [rp, op] = find(part);
    auto [rw, ow] = find(whole);
    int64_t delta = offset + ow - op;  // root(part) position -> root(whole) position
    if (rp == rw) {
      if (delta != 0) conflicted_.insert(rp);
      return false;
    }
    parent_[rp] = rw;
    offset_[rp] = delta;
    return true;
  }

  // whole = major (x) minor, row-major. More than two factors nest through
  // virtual nodes: whole = f0 (x) (f1 (x) (f2 ...)).
  void product(int whole, const std::vector<int>& factors) {
    if (factors.empty()) return;
    int minor = factors.back();
    for (size_t i = factors.size() - 1; i-- > 1;) {
      int group = add_node(length_[factors[i]] * length_[minor]);
      products_.push_back({group, factors[i], minor});
      minor = group;
    }
    if (factors.size() == 1)
      relate(factors[0], whole, 0);
    else
      products_.push_back({whole, factors[0], minor});
  }

  void freeze(int a) { frozen_axes_.insert(a); }
  void mark_broadcast(int a) { broadcast_axes_.insert(a); }
  void mark_combined(int a) { combined_axes_.insert(a); }

  struct Product {
    int whole, major, minor;
  };

  // Makes every product on one line agree: equal minor sizes, minors the
  // same positions, majors related at the offsets the wholes imply. Lines
  // where that is impossible are broken (kept at full size).
  void resolve_products() {
    for (Product& p : products_) {
      // A factor of length 1 adds nothing: the whole is the other factor.
      if (length_[p.minor] == 1)
        relate(p.major, p.whole, 0), p.whole = -1;
      else if (length_[p.major] == 1)
        relate(p.minor, p.whole, 0), p.whole = -1;
    }
    for (bool changed = true; changed;) {
      changed = false;
      std::map<int, const Product*> reference;
      for (const Product& p : products_) {
        if (p.whole < 0) continue;
        auto [line, offset] = find(p.whole);
        auto [it, first] = reference.emplace(line, &p);
        if (first) continue;
        const Product& r = *it->second;
        int64_t m = length_[r.minor];
        int64_t delta = offset - find(r.whole).second;
        if (length_[p.minor] != m || delta % m != 0) {
          broken_.insert(line);
          continue;
        }
        changed |= relate(p.minor, r.minor, 0);
        changed |= relate(p.major, r.major, delta / m);
      }
    }
    product_of_line_.clear();
    for (const Product& p : products_) {
      if (p.whole < 0) continue;
      int line = find(p.whole).first;
      if (!broken_.count(line)) product_of_line_.emplace(line, p);
    }
  }

  // The product that defines a line, or nullptr for a plain line.
  const Product* product_of(int root) const {
    auto it = product_of_line_.find(root);
    return it == product_of_line_.end() ? nullptr : &it->second;
  }

  // Roots of lines that must keep full size: frozen by an operator, related
  // at two different offsets (a shift we do not reason about), broken
  // products, or both broadcast and combined (a count of repeated values).
  // A product line passes its marks on to its factors.
  std::set<int> frozen_roots() const {
    std::set<int> frozen, broadcast, combined;
    for (int a : frozen_axes_) frozen.insert(find(a).first);
    for (int c : conflicted_) frozen.insert(find(c).first);
    for (int b : broken_) frozen.insert(find(b).first);
    for (int a : broadcast_axes_) broadcast.insert(find(a).first);
    for (int a : combined_axes_) combined.insert(find(a).first);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [line, p] : product_of_line_) {
        for (int factor : {find(p.major).first, find(p.minor).first}) {
          for (std::set<int>* marks : {&frozen, &broadcast, &combined})
            if (marks->count(line) && marks->insert(factor).second) changed = true;
        }
      }
    }
    for (int b : broadcast)
      if (combined.count(b)) frozen.insert(b);
    return frozen;
  }

 private:
  std::vector<int> base_;
  std::vector<int> parent_;
  std::vector<int64_t> offset_;
  std::vector<int64_t> length_;
  std::vector<Product> products_;
  std::map<int, Product> product_of_line_;
  std::set<int> conflicted_;
  std::set<int> broken_;
  std::set<int> frozen_axes_;
  std::set<int> broadcast_axes_;
  std::set<int> combined_axes_;
};

// Piecewise map of one plain line: boundaries (full positions) -> reduced
// positions.
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

// Reduced positions on every line. A plain line keeps pieces of at most 2
// (or its full size when frozen); a product line whole = major (x) minor
// maps position major*m + minor to reduced(major)*m' + reduced(minor), so
// its boundaries must fall on multiples of m (they become major boundaries).
class LineMaps {
 public:
  LineMaps(const AxisLines& lines) : lines_(lines) {
    for (int a = 0; a < lines.count(); ++a) {
      auto [root, offset] = lines.find(a);
      bounds_[root].insert(offset);
      bounds_[root].insert(offset + lines.length(a));
    }
    // Push product-line boundaries down to their major lines (repeatedly,
    // for nested products).
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [root, set] : bounds_) {
        const AxisLines::Product* p = lines.product_of(root);
        if (!p) continue;
        auto [major_root, major_offset] = lines.find(p->major);
        int64_t whole_offset = lines.find(p->whole).second;
        int64_t m = lines.length(p->minor);
        for (int64_t b : set) {
          if ((b - whole_offset) % m != 0)
            throw std::logic_error("a boundary cuts through a reshaped dimension");
          changed |= bounds_[major_root].insert(major_offset + (b - whole_offset) / m).second;
        }
      }
    }
    std::set<int> frozen = lines.frozen_roots();
    for (auto& [root, set] : bounds_) {
      LineMap m;
      m.bounds.assign(set.begin(), set.end());
      int64_t r = 0;
      for (size_t j = 0; j < m.bounds.size(); ++j) {
        if (j > 0) {
          int64_t len = m.bounds[j] - m.bounds[j - 1];
          r += frozen.count(root) ? len : std::min<int64_t>(len, 2);
        }
        m.reduced.push_back(r);
      }
      plain_[root] = std::move(m);
    }
  }

  // Reduced position of boundary p on line `root`.
  int64_t map(int root, int64_t p, int depth = 0) const {
    const AxisLines::Product* prod = depth < 16 ? lines_.product_of(root) : nullptr;
    if (!prod) return plain_.at(root).map(p);
    auto [major_root, major_offset] = lines_.find(prod->major);
    int64_t m = lines_.length(prod->minor);
    int64_t q = (p - lines_.find(prod->whole).second) / m;
    return map(major_root, major_offset + q, depth + 1) * reduced_length(prod->minor, depth + 1);
  }

  // Full position on line `root` of reduced position g.
  int64_t unmap(int root, int64_t g, int depth = 0) const {
    const AxisLines::Product* prod = depth < 16 ? lines_.product_of(root) : nullptr;
    if (!prod) return plain_.at(root).unmap(g);
    auto [major_root, major_offset] = lines_.find(prod->major);
    auto [minor_root, minor_offset] = lines_.find(prod->minor);
    int64_t m = lines_.length(prod->minor);
    int64_t m_reduced = reduced_length(prod->minor, depth + 1);
    int64_t major_full = unmap(major_root, g / m_reduced, depth + 1) - major_offset;
    int64_t minor_start = map(minor_root, minor_offset, depth + 1);
    int64_t minor_full = unmap(minor_root, minor_start + g % m_reduced, depth + 1) - minor_offset;
    return lines_.find(prod->whole).second + major_full * m + minor_full;
  }

  // Reduced length of axis a, and of the range [0, p) on it.
  int64_t reduced_length(int a, int depth = 0) const {
    return map_axis(a, lines_.length(a), depth);
  }
  int64_t map_axis(int a, int64_t p, int depth = 0) const {
    auto [root, offset] = lines_.find(a);
    return map(root, offset + p, depth) - map(root, offset, depth);
  }

 private:
  const AxisLines& lines_;
  std::map<int, std::set<int64_t>> bounds_;
  std::map<int, LineMap> plain_;
};

class AxisRelationsImpl : public AxisRelations {
 public:
  AxisRelationsImpl(AxisLines& lines, const StageOp& op) : lines_(lines), op_(op) {}
  void same(AxisRef a, AxisRef b) override { lines_.relate(axis(a), axis(b), 0); }
  void sub_range(AxisRef part, AxisRef whole, int64_t offset) override {
    lines_.relate(axis(part), axis(whole), offset);
  }
  void product(AxisRef whole, const std::vector<AxisRef>& factors) override {
    std::vector<int> ids;
    for (AxisRef f : factors) ids.push_back(axis(f));
    lines_.product(axis(whole), ids);
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

  lines.resolve_products();
  LineMaps maps(lines);
  auto map_axis = [&](int a, int64_t p) { return maps.map_axis(a, p); };

  result = original;
  for (size_t t = 0; t < original.tensors.size(); ++t) {
    StageTensor& st = result.tensors[t];
    for (size_t d = 0; d < st.full_shape.size(); ++d) {
      int a = lines.axis(t, d);
      st.shape[d] = map_axis(a, st.full_shape[d]);
      auto [root, offset] = lines.find(a);
      int64_t start = maps.map(root, offset);
      std::vector<int64_t>& positions = result.full_position[t][d];
      positions.resize(st.shape[d]);
      for (int64_t q = 0; q < st.shape[d]; ++q) positions[q] = maps.unmap(root, start + q) - offset;
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
