#include "engine/stage/shape_reduction.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/ops/op_registry.h"

namespace shardproof {
namespace {

bool is_integer(const StageTensor& t) {
  return dclass_of(t.dtype) == DClass::Int;
}

// Union-find over axes with offsets: position p on an axis is position
// p + offset on its root line. Virtual nodes stand for the major factor of a
// product line and for groups of minor factors. Every integer tensor also
// has a *value node*: its values, read as positions (value u is position
// u + offset on the value node's root line). Value nodes carry no length and
// add no boundaries; they only say which line, at which offset, an integer
// tensor's values point into (docs/soundness.md, "Integer positions").
class AxisLines {
 public:
  explicit AxisLines(const Stage& stage) {
    for (const StageTensor& t : stage.tensors) {
      base_.push_back(static_cast<int>(parent_.size()));
      for (int64_t len : t.full_shape) add_node(len);
    }
    for (const StageTensor& t : stage.tensors) value_.push_back(is_integer(t) ? add_value() : -1);
  }

  int axis(int tensor, int dim) const { return base_[tensor] + dim; }
  // The value node of an integer tensor, -1 for other tensors.
  int value(int tensor) const { return value_[tensor]; }
  bool is_value_node(int a) const { return is_value_[a]; }
  int count() const { return static_cast<int>(parent_.size()); }
  int64_t length(int a) const { return length_[a]; }
  int add_node(int64_t length) {
    parent_.push_back(static_cast<int>(parent_.size()));
    offset_.push_back(0);
    length_.push_back(length);
    is_value_.push_back(false);
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
  void mark_comparison_broadcast(int a) { comparison_broadcast_axes_.insert(a); }
  void mark_shift_broadcast(int a, int value_node) { shift_broadcasts_.push_back({a, value_node}); }
  // An integer use shape reduction cannot map: the line of these values
  // keeps its full size.
  void mark_opaque(int value_node) {
    if (value_node >= 0) opaque_.insert(value_node);
  }
  const std::set<int>& opaque() const { return opaque_; }

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

  // Lines that take part in a product, as the whole or as a factor.
  std::set<int> product_roots() const {
    std::set<int> roots;
    for (const Product& p : products_)
      for (int node : {p.whole, p.major, p.minor})
        if (node >= 0) roots.insert(find(node).first);
    return roots;
  }

  // The shift broadcasts that count as ordinary broadcasts: along a
  // position line, or when the shifted values may be used as numbers (their
  // line is not a position line or keeps full size). Values used only as
  // positions are a bijective relabelling of the unshifted ones: the
  // repeated constant cannot be counted.
  std::set<int> shift_broadcast_axes(const std::set<int>& position_roots,
                                     const std::set<int>& frozen) const {
    std::set<int> axes;
    for (auto [a, v] : shift_broadcasts_) {
      int values = find(v).first;
      if (position_roots.count(find(a).first) || !position_roots.count(values) ||
          frozen.count(values))
        axes.insert(a);
    }
    return axes;
  }

  // Roots of lines that must keep full size: frozen by an operator, related
  // at two different offsets (a shift we do not reason about), broken
  // products, or both broadcast and combined (a count of repeated values).
  // A comparison broadcast counts as a broadcast only on `position_roots`,
  // lines whose positions integer values refer to; `more_broadcasts` are
  // further broadcast axes. A product line passes its marks on to its
  // factors.
  std::set<int> frozen_roots(const std::set<int>& position_roots,
                             const std::set<int>& more_broadcasts) const {
    std::set<int> frozen, broadcast, combined;
    for (int a : frozen_axes_) frozen.insert(find(a).first);
    for (int c : conflicted_) frozen.insert(find(c).first);
    for (int b : broken_) frozen.insert(find(b).first);
    for (int a : broadcast_axes_) broadcast.insert(find(a).first);
    for (int a : more_broadcasts) broadcast.insert(find(a).first);
    for (int a : comparison_broadcast_axes_)
      if (position_roots.count(find(a).first)) broadcast.insert(find(a).first);
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
  int add_value() {
    int node = add_node(0);
    is_value_[node] = true;
    return node;
  }

  std::vector<int> base_;
  std::vector<int> value_;
  std::vector<int> parent_;
  std::vector<int64_t> offset_;
  std::vector<int64_t> length_;
  std::vector<bool> is_value_;
  std::vector<Product> products_;
  std::map<int, Product> product_of_line_;
  std::set<int> conflicted_;
  std::set<int> broken_;
  std::set<int> frozen_axes_;
  std::set<int> broadcast_axes_;
  std::set<int> combined_axes_;
  std::set<int> comparison_broadcast_axes_;
  std::vector<std::pair<int, int>> shift_broadcasts_;  // (axis, value node of the result)
  std::set<int> opaque_;
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

// Reduced positions on every line. A plain line keeps pieces of at most its
// cap (2 unless integer positions need more; its full size when frozen); a
// product line whole = major (x) minor maps position major*m + minor to
// reduced(major)*m' + reduced(minor), so its boundaries must fall on
// multiples of m (they become major boundaries).
class LineMaps {
 public:
  explicit LineMaps(const AxisLines& lines) : lines_(lines) {
    for (int a = 0; a < lines.count(); ++a) {
      if (lines.is_value_node(a)) continue;
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
  }

  // Lays out every line: pieces of frozen lines keep their length, others
  // min(length, cap) with cap from `caps` (default 2). May be called again.
  void build(const std::set<int>& frozen, const std::map<int, int64_t>& caps) {
    frozen_ = frozen;
    plain_.clear();
    product_memo_.clear();
    for (auto& [root, set] : bounds_) {
      auto cap = caps.find(root);
      int64_t limit = cap == caps.end() ? 2 : cap->second;
      LineMap m;
      m.bounds.assign(set.begin(), set.end());
      int64_t r = 0;
      for (size_t j = 0; j < m.bounds.size(); ++j) {
        if (j > 0) {
          int64_t len = m.bounds[j] - m.bounds[j - 1];
          r += frozen.count(root) ? len : std::min(len, limit);
        }
        m.reduced.push_back(r);
      }
      plain_[root] = std::move(m);
    }
  }

  // Boundaries of a line in full positions; nullptr for a line without axes.
  const std::set<int64_t>* bounds(int root) const {
    auto it = bounds_.find(root);
    return it == bounds_.end() ? nullptr : &it->second;
  }
  bool frozen(int root) const { return frozen_.count(root) > 0; }

  // A full position p on plain line `root` is *mappable* when it is a
  // boundary or lies outside the line; positions outside keep their
  // distance to the nearest end, so order and equality with every other
  // mappable position survive. On a frozen line every position is mappable.
  std::optional<int64_t> map_value(int root, int64_t p) const {
    const LineMap& m = plain_.at(root);
    if (frozen(root) || p < m.bounds.front()) return p - m.bounds.front() + m.reduced.front();
    if (p > m.bounds.back()) return p - m.bounds.back() + m.reduced.back();
    auto it = std::lower_bound(m.bounds.begin(), m.bounds.end(), p);
    if (*it != p) return std::nullopt;
    return m.reduced[it - m.bounds.begin()];
  }

  // Reduced position of boundary p on line `root`.
  int64_t map(int root, int64_t p, int depth = 0) const {
    const AxisLines::Product* prod = depth < 16 ? lines_.product_of(root) : nullptr;
    if (!prod) {
      const LineMap& m = plain_.at(root);
      // A frozen line keeps every position, boundary or not: a relation
      // dropped as contradictory (a wrong-offset bug) leaves its offsets
      // unregistered, and they must still map.
      if (frozen(root)) return p - m.bounds.front() + m.reduced.front();
      return m.map(p);
    }
    // Memoised: products nest (and a product's minor may itself be one), so
    // without it the recursion is exponential in the nesting depth.
    const std::tuple<int, int64_t, int> key{root, p, depth};
    if (auto it = product_memo_.find(key); it != product_memo_.end()) return it->second;
    auto [major_root, major_offset] = lines_.find(prod->major);
    int64_t m = lines_.length(prod->minor);
    int64_t q = (p - lines_.find(prod->whole).second) / m;
    const int64_t r =
        map(major_root, major_offset + q, depth + 1) * reduced_length(prod->minor, depth + 1);
    product_memo_.emplace(key, r);
    return r;
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
  std::set<int> frozen_;
  mutable std::map<std::tuple<int, int64_t, int>, int64_t> product_memo_;
};

// ---------------------------------------------------------------- integer positions

// A const used as the constant of add/sub on a position:
// values(to) = values(from) + sign * constant.
struct ShiftUse {
  int constant;                // stage tensor of the const
  int from_tensor, to_tensor;  // stage tensors of the position operand and the result
  int from, to;                // their value nodes
  int sign;
};

// What the operators said about integer values, beyond the union-find.
struct PositionFacts {
  // Per stage tensor: the value of an integer `const` op's output.
  std::vector<std::optional<int64_t>> const_value;
  std::vector<ShiftUse> shifts;
};

// Constants beyond this magnitude are never mapped (no overflow in offsets).
constexpr int64_t kMaxPositionConstant = int64_t{1} << 40;

PositionFacts position_facts(const Stage& stage) {
  PositionFacts facts;
  facts.const_value.resize(stage.tensors.size());
  for (const StageOp& op : stage.ops) {
    if (op.op != "const" || op.out.size() != 1 || !is_integer(stage.tensors[op.out[0]])) continue;
    auto it = op.attrs.find("value");
    if (it == op.attrs.end() || !it->second.is_int()) continue;
    int64_t v = it->second.as_int();
    if (v > -kMaxPositionConstant && v < kMaxPositionConstant) facts.const_value[op.out[0]] = v;
  }
  return facts;
}

class AxisRelationsImpl : public AxisRelations {
 public:
  AxisRelationsImpl(AxisLines& lines, const StageOp& op, PositionFacts& facts)
      : lines_(lines), op_(op), facts_(facts), mentioned_(op.in.size() + op.out.size()) {}
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
  void compare_broadcast(AxisRef a) override { lines_.mark_comparison_broadcast(axis(a)); }
  void shift_broadcast(AxisRef a) override {
    lines_.mark_shift_broadcast(axis(a), lines_.value(op_.out.at(0)));
  }

  void positions_on(int values, AxisRef target) override {
    int v = value(values);
    if (v < 0) return freeze(target);
    lines_.relate(v, axis(target), 0);
  }
  void same_positions(int a, int b) override {
    int va = value(a), vb = value(b);
    if (va >= 0 && vb >= 0) lines_.relate(va, vb, 0);
  }
  // Only a position plus or minus a constant is a position: out = a + sign*c
  // puts out's values at offset -sign*c from a's. Anything else is opaque.
  void shifted_positions(int out, int a, int b, int sign) override {
    int vo = value(out), va = value(a), vb = value(b);
    if (vo < 0 || va < 0 || vb < 0) return;
    std::optional<int64_t> ca = constant(a), cb = constant(b);
    if (cb && !ca) {
      lines_.relate(vo, va, -sign * *cb);
      facts_.shifts.push_back({tensor(b), tensor(a), tensor(out), va, vo, sign});
    } else if (ca && !cb && sign > 0) {
      lines_.relate(vo, vb, -*ca);
      facts_.shifts.push_back({tensor(a), tensor(b), tensor(out), vb, vo, sign});
    } else {
      for (int v : {vo, va, vb}) lines_.mark_opaque(v);
    }
  }
  // Equality of two positions survives every injective map; order only
  // survives against a constant (a boundary or outside the line), since
  // within a piece the argument permutes positions freely.
  void compared_positions(int a, int b, bool ordered) override {
    int va = value(a), vb = value(b);
    if (va < 0 || vb < 0) return;
    if (ordered && !constant(a) && !constant(b)) {
      lines_.mark_opaque(va);
      lines_.mark_opaque(vb);
      return;
    }
    lines_.relate(va, vb, 0);
  }

  // Integer operands the operator did not mention are opaque uses.
  void finish(const Stage& stage) {
    for (size_t s = 0; s < mentioned_.size(); ++s) {
      int t = tensor(static_cast<int>(s));
      if (!mentioned_[s] && is_integer(stage.tensors[t])) lines_.mark_opaque(lines_.value(t));
    }
  }

 private:
  int tensor(int slot) const {
    int n_in = static_cast<int>(op_.in.size());
    return slot < n_in ? op_.in[slot] : op_.out[slot - n_in];
  }
  int axis(AxisRef r) const { return lines_.axis(tensor(r.slot), r.dim); }
  int value(int slot) {
    mentioned_.at(slot) = true;
    return lines_.value(tensor(slot));
  }
  std::optional<int64_t> constant(int slot) const { return facts_.const_value[tensor(slot)]; }

  AxisLines& lines_;
  const StageOp& op_;
  PositionFacts& facts_;
  std::vector<bool> mentioned_;
};

// Lines whose positions integer values refer to ("position lines"), which of
// them must keep full size, and how many pieces' worth of positions the
// integers can single out on each (docs/soundness.md, "Integer positions").
class PositionLines {
 public:
  PositionLines(const Stage& stage, const AxisLines& lines, const LineMaps& maps,
                const PositionFacts& facts)
      : stage_(stage), lines_(lines), maps_(maps), facts_(facts) {
    for (size_t t = 0; t < stage.tensors.size(); ++t) {
      int v = lines.value(static_cast<int>(t));
      if (v >= 0 && maps.bounds(lines.find(v).first)) roots_.insert(lines.find(v).first);
    }
  }

  const std::set<int>& roots() const { return roots_; }

  // Position lines that keep full size on top of `frozen`: opaque uses,
  // products, sources that point into their own line, offsets and
  // constants that are neither boundaries nor outside the line.
  std::set<int> freezes(const std::set<int>& frozen) const {
    std::set<int> out;
    for (int v : lines_.opaque()) out.insert(lines_.find(v).first);
    for (int r : lines_.product_roots())
      if (roots_.count(r)) out.insert(r);
    for (size_t t = 0; t < stage_.tensors.size(); ++t) {
      int v = lines_.value(static_cast<int>(t));
      if (v < 0) continue;
      auto [root, offset] = lines_.find(v);
      if (!roots_.count(root) || frozen.count(root)) continue;
      if (is_source(t) && has_axis_on(t, root)) out.insert(root);
      if (!mappable(root, offset)) out.insert(root);
      if (auto c = facts_.const_value[t]; c && !mappable(root, *c + offset)) out.insert(root);
    }
    return out;
  }

  // Pieces of a position line keep min(length, K + 2) elements, K = the
  // integer elements that can name a position on it: every element of a
  // source tensor (at the sizes `sizes` gives) and every distinct constant
  // position inside the line.
  std::map<int, int64_t> caps(const std::set<int>& frozen, const LineMaps& sizes) const {
    std::map<int, int64_t> witnesses;
    std::map<int, std::set<int64_t>> constants;
    for (size_t t = 0; t < stage_.tensors.size(); ++t) {
      int v = lines_.value(static_cast<int>(t));
      if (v < 0) continue;
      auto [root, offset] = lines_.find(v);
      if (!roots_.count(root) || frozen.count(root)) continue;
      if (is_source(t))
        witnesses[root] = std::min(kMaxPositionConstant, witnesses[root] + reduced_count(t, sizes));
      const std::set<int64_t>& b = *maps_.bounds(root);
      if (auto c = facts_.const_value[t];
          c && *c + offset >= *b.begin() && *c + offset < *b.rbegin())
        constants[root].insert(*c + offset);
    }
    std::map<int, int64_t> caps;
    for (int root : roots_)
      if (!frozen.count(root)) caps[root] = witnesses[root] + constants[root].size() + 2;
    return caps;
  }

  // The value each integer const must take at reduced sizes so that every
  // use agrees with the line maps: a position c (value node at offset o)
  // becomes psi(c + o) - psi(o); the constant of out = from + sign * c
  // becomes sign * (psi(o_from) - psi(o_out)); an opaque use keeps c. When
  // the uses of a const disagree, `conflict` lists it and the tensors its
  // shifts relate (their lines must keep full size) and nothing is returned.
  std::map<int, int64_t> constants(const LineMaps& maps, std::vector<int>& conflict) const {
    std::set<int> opaque_roots;
    for (int v : lines_.opaque()) opaque_roots.insert(lines_.find(v).first);
    std::map<int, std::set<int64_t>> wanted;
    for (size_t t = 0; t < stage_.tensors.size(); ++t) {
      auto c = facts_.const_value[t];
      if (!c) continue;
      auto [root, offset] = lines_.find(lines_.value(static_cast<int>(t)));
      if (opaque_roots.count(root)) {
        wanted[t].insert(*c);
      } else if (roots_.count(root)) {
        auto p = maps.map_value(root, *c + offset), o = maps.map_value(root, offset);
        wanted[t].insert(p && o ? *p - *o : kMaxPositionConstant);
      }
    }
    for (const ShiftUse& use : facts_.shifts) {
      auto [root, from] = lines_.find(use.from);
      int64_t to = lines_.find(use.to).second;
      int64_t c = *facts_.const_value[use.constant];
      if (!roots_.count(root)) {
        wanted[use.constant].insert(c);
        continue;
      }
      auto pf = maps.map_value(root, from), pt = maps.map_value(root, to);
      wanted[use.constant].insert(pf && pt ? use.sign * (*pf - *pt) : kMaxPositionConstant);
    }
    std::map<int, int64_t> values;
    for (auto& [t, set] : wanted) {
      if (set.size() == 1 && *set.begin() != kMaxPositionConstant) {
        values[t] = *set.begin();
        continue;
      }
      conflict = {t};
      for (const ShiftUse& use : facts_.shifts)
        if (use.constant == t) conflict.insert(conflict.end(), {use.from_tensor, use.to_tensor});
      return {};
    }
    return values;
  }

  // For reports and random testing: how each integer tensor's values map.
  std::vector<std::optional<ValueMap>> value_maps(const LineMaps& maps) const {
    std::vector<std::optional<ValueMap>> out(stage_.tensors.size());
    for (size_t t = 0; t < stage_.tensors.size(); ++t) {
      int v = lines_.value(static_cast<int>(t));
      if (v < 0 || facts_.const_value[t]) continue;
      auto [root, offset] = lines_.find(v);
      if (!roots_.count(root)) continue;
      ValueMap m;
      for (int64_t b : *maps_.bounds(root)) {
        m.full_bounds.push_back(b);
        m.reduced_bounds.push_back(*maps.map_value(root, b));
      }
      m.full_offset = offset;
      m.reduced_offset = *maps.map_value(root, offset);
      out[t] = std::move(m);
    }
    return out;
  }

 private:
  // Integer values that no op computes in the stage: logical free tensors
  // and additive parts (a plain parallel claim holds its logical slice's
  // values, related to them by lineage).
  bool is_source(size_t t) const {
    const StageTensor& st = stage_.tensors[t];
    return st.free && (!st.parallel || (st.of && st.of->has_part));
  }
  bool has_axis_on(size_t t, int root) const {
    for (size_t d = 0; d < stage_.tensors[t].full_shape.size(); ++d)
      if (lines_.find(lines_.axis(static_cast<int>(t), static_cast<int>(d))).first == root)
        return true;
    return false;
  }
  bool mappable(int root, int64_t p) const {
    const std::set<int64_t>& b = *maps_.bounds(root);
    return p < *b.begin() || p > *b.rbegin() || b.count(p);
  }
  // Saturates at kMaxPositionConstant: beyond that the cap keeps every piece.
  int64_t reduced_count(size_t t, const LineMaps& sizes) const {
    int64_t n = 1;
    for (size_t d = 0; d < stage_.tensors[t].full_shape.size(); ++d) {
      int64_t len = sizes.reduced_length(lines_.axis(static_cast<int>(t), static_cast<int>(d)));
      n = len > 0 && n > kMaxPositionConstant / len ? kMaxPositionConstant : n * len;
    }
    return n;
  }

  const Stage& stage_;
  const AxisLines& lines_;
  const LineMaps& maps_;
  const PositionFacts& facts_;
  std::set<int> roots_;
};

// ---------------------------------------------------------------- attempts

std::vector<TensorInfo> infos(const Stage& s, const std::vector<int>& ids, bool full) {
  std::vector<TensorInfo> out;
  for (int t : ids)
    out.push_back({full ? s.tensors[t].full_shape : s.tensors[t].shape, s.tensors[t].dtype});
  return out;
}

// What earlier attempts learned must keep full size.
struct Restrictions {
  std::set<int> frozen_tensors;  // every axis at full size
  std::set<int> opaque_tensors;  // the line of their values at full size
};

enum Failure : int { kOk = -1, kLineage = -2, kUnmappable = -3, kConstant = -4 };

// Relates every axis and integer value of the stage: operators, lineage,
// and what earlier attempts froze.
void relate_stage(const Stage& stage, const Restrictions& restrictions, AxisLines& lines,
                  PositionFacts& facts) {
  const OpRegistry& registry = OpRegistry::instance();
  for (const StageOp& op : stage.ops) {
    AxisRelationsImpl rel(lines, op, facts);
    registry.find(op.op)->relate_axes(op.attrs, infos(stage, op.in, true),
                                      infos(stage, op.out, true), rel);
    rel.finish(stage);
  }
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    int ti = static_cast<int>(t);
    if (st.of && st.logical_index >= 0) {
      for (size_t d = 0; d < st.full_shape.size(); ++d)
        lines.relate(lines.axis(ti, d), lines.axis(st.logical_index, d), st.of->slice[d].first);
      // A claim holds its logical slice's values; a part of an integer
      // tensor is arithmetic on them, which no map preserves.
      if (st.of->has_part) {
        lines.mark_opaque(lines.value(ti));
        lines.mark_opaque(lines.value(st.logical_index));
      } else if (lines.value(ti) >= 0 && lines.value(st.logical_index) >= 0) {
        lines.relate(lines.value(ti), lines.value(st.logical_index), 0);
      }
    }
    if (restrictions.frozen_tensors.count(ti))
      for (size_t d = 0; d < st.full_shape.size(); ++d) lines.freeze(lines.axis(ti, d));
    if (restrictions.opaque_tensors.count(ti)) lines.mark_opaque(lines.value(ti));
  }
}

// Decides every line's layout: which lines keep full size, and the piece
// cap of each position line (computed from the other lines' reduced sizes;
// sources with axes on position lines count at full size there).
void layout(const AxisLines& lines, const PositionLines& positions, LineMaps& maps) {
  // Freezing a position line can turn shift broadcasts into ordinary ones,
  // which can freeze more lines: iterate (monotone, so it ends).
  std::set<int> frozen, shift_axes;
  for (;;) {
    frozen = lines.frozen_roots(positions.roots(), shift_axes);
    std::set<int> more = positions.freezes(frozen);
    frozen.insert(more.begin(), more.end());
    std::set<int> now = lines.shift_broadcast_axes(positions.roots(), frozen);
    if (now == shift_axes) break;
    shift_axes = std::move(now);
  }
  std::set<int> sizing = frozen;
  sizing.insert(positions.roots().begin(), positions.roots().end());
  maps.build(sizing, {});
  std::map<int, int64_t> caps = positions.caps(frozen, maps);
  maps.build(frozen, caps);
}

// One reduction attempt under `restrictions`. Returns kOk, a Failure, or the
// index of an op whose reduced shapes do not check; for kConstant,
// `opaque` lists the tensors whose value lines must keep full size; for
// kLineage, `claim` is the parallel tensor whose claim no longer fits.
int attempt(const Stage& original, const Restrictions& restrictions, Stage& result,
            std::vector<int>& opaque, int& claim) {
  const OpRegistry& registry = OpRegistry::instance();
  AxisLines lines(original);
  PositionFacts facts = position_facts(original);
  relate_stage(original, restrictions, lines, facts);
  lines.resolve_products();
  LineMaps maps(lines);
  PositionLines positions(original, lines, maps, facts);
  layout(lines, positions, maps);
  std::map<int, int64_t> constants = positions.constants(maps, opaque);
  if (!opaque.empty()) return kConstant;
  auto map_axis = [&](int a, int64_t p) { return maps.map_axis(a, p); };

  result = original;
  result.value_maps = positions.value_maps(maps);
  for (size_t t = 0; t < original.tensors.size(); ++t) {
    StageTensor& st = result.tensors[t];
    for (size_t d = 0; d < st.full_shape.size(); ++d) {
      int a = lines.axis(t, d);
      st.shape[d] = map_axis(a, st.full_shape[d]);
      auto [root, offset] = lines.find(a);
      int64_t start = maps.map(root, offset);
      if (result.full_position.size() != original.tensors.size()) {
        result.full_position.assign(original.tensors.size(), {});
        for (size_t u = 0; u < original.tensors.size(); ++u)
          result.full_position[u].resize(original.tensors[u].full_shape.size());
      }
      std::vector<int64_t>& positions = result.full_position[t][d];
      positions.resize(st.shape[d]);
      for (int64_t q = 0; q < st.shape[d]; ++q) positions[q] = maps.unmap(root, start + q) - offset;
    }
    if (st.of && st.logical_index >= 0)
      for (size_t d = 0; d < st.full_shape.size(); ++d) {
        int la = lines.axis(st.logical_index, d);
        auto& range = st.of->slice[d];
        range = {map_axis(la, range.first), map_axis(la, range.second)};
        if (range.second - range.first != st.shape[d]) {
          claim = static_cast<int>(t);
          return kLineage;
        }
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
    if (op.op == "const" && constants.count(op.out.at(0)))
      op.attrs["value"] = Attr::of_int(constants.at(op.out[0]));
    std::vector<TensorInfo> out;
    if (!def->infer(op.attrs, infos(result, op.in, false), op.out.size(), out).empty())
      return static_cast<int>(i);
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].shape != result.tensors[op.out[k]].shape) return static_cast<int>(i);
  }
  return kOk;
}

}  // namespace

void reduce_stage(Stage& stage) {
  Restrictions restrictions;
  for (int round = 0; round < 16; ++round) {
    Stage result;
    int failed;
    int claim = -1;
    std::vector<int> opaque;
    try {
      failed = attempt(stage, restrictions, result, opaque, claim);
    } catch (const std::exception& e) {
      failed = kUnmappable;
    }
    if (failed == kOk) {
      result.reduced = true;
      if (!restrictions.frozen_tensors.empty() || !restrictions.opaque_tensors.empty())
        result.reduction_note = "some axes kept full size: reduced shapes did not check";
      stage = std::move(result);
      return;
    }
    if (failed == kConstant) {
      // A const's uses want different reduced values: keep their lines whole.
      size_t before = restrictions.opaque_tensors.size();
      restrictions.opaque_tensors.insert(opaque.begin(), opaque.end());
      if (restrictions.opaque_tensors.size() == before) break;
      continue;
    }
    size_t before = restrictions.frozen_tensors.size();
    if (failed == kLineage && claim >= 0) {
      // A claim whose slice no longer fits (its lines relate at offsets that
      // contradict each other, as a wrong-offset bug makes them): keep the
      // claiming tensor and its logical tensor whole, reduce the rest.
      restrictions.frozen_tensors.insert(claim);
      restrictions.frozen_tensors.insert(stage.tensors[claim].logical_index);
    } else if (failed < 0) {
      break;  // an unmappable position: give up reducing
    } else {
      for (int t : stage.ops[failed].in) restrictions.frozen_tensors.insert(t);
      for (int t : stage.ops[failed].out) restrictions.frozen_tensors.insert(t);
    }
    if (restrictions.frozen_tensors.size() == before) break;
  }
  stage.reduction_note = "kept full sizes: no sound reduction found";
}

}  // namespace shardproof
