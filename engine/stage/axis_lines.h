// Shape reduction's lines: the union-find over stage axes and integer value
// nodes, with products and the marks operators set (docs/soundness.md, 3).
#pragma once

#include <map>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include "engine/stage/stage.h"

namespace shardproof::reduction {

inline bool is_integer(const StageTensor& t) {
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
      if (delta != 0) {
        conflicted_.insert(rp);
        conflict_shifts_.push_back({rp, delta});
      }
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

  // For each line some relation contradicted (related to itself at another
  // offset: a rank's strided shard, two halves of one sequence), the gcd of
  // the offsets it was contradicted by: a layout that repeats with that
  // period keeps every such relation.
  std::map<int, int64_t> conflict_periods() const {
    std::map<int, int64_t> periods;
    for (auto [line, delta] : conflict_shifts_) {
      int64_t& g = periods[find(line).first];
      g = std::gcd(g, delta < 0 ? -delta : delta);
    }
    return periods;
  }

  void freeze(int a) { frozen_axes_.insert(a); }
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

  // Breaks the products of `roots` (lines a boundary cuts through a minor
  // block of, LineMaps::cut_products): each becomes a plain line kept at
  // full size, as a line with two products of different minor sizes is,
  // and so do its factors (a reshape between them keeps its shape rule);
  // the other lines of the tensors involved still reduce.
  void break_products(const std::set<int>& roots) {
    for (const Product& p : products_)
      if (p.whole >= 0 && roots.count(find(p.whole).first))
        for (int factor : {p.major, p.minor}) frozen_axes_.insert(factor);
    for (int root : roots) {
      broken_.insert(root);
      product_of_line_.erase(root);
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

  // Roots of lines that must keep full size: frozen by an operator, related
  // at two different offsets (a shift we do not reason about), or broken
  // products. A product line passes its freeze on to its factors. (A line
  // whose combine may count repeated values is frozen before, by value
  // variation: docs/soundness.md, 3.2.)
  // Without `sound`, only the lines no reduction can map (reshapes, broken
  // products); contradicting lines are laid out by their period instead
  // (conflict_periods): shape_reduction.h, for proposals.
  std::set<int> frozen_roots(bool sound = true) const {
    std::set<int> frozen;
    for (int a : frozen_axes_) frozen.insert(find(a).first);
    if (sound)
      for (int c : conflicted_) frozen.insert(find(c).first);
    for (int b : broken_) frozen.insert(find(b).first);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [line, p] : product_of_line_)
        if (frozen.count(line))
          for (int factor : {find(p.major).first, find(p.minor).first})
            changed |= frozen.insert(factor).second;
    }
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
  std::vector<std::pair<int, int64_t>> conflict_shifts_;  // (line, offset it contradicts by)
  std::set<int> broken_;
  std::set<int> frozen_axes_;
  std::set<int> opaque_;
};

// Piecewise map of one plain line: boundaries (full positions) -> reduced

}  // namespace shardproof::reduction
