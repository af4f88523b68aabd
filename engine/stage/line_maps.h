// Shape reduction's piece maps: full positions on every line to reduced ones.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "engine/stage/axis_lines.h"

namespace shardproof::reduction {

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
  // `periodic`: lines that relations contradict get a boundary at every
  // multiple of their period (AxisLines::conflict_periods), so a shift by
  // the period maps to a shift of the reduced line and the contradicting
  // relations hold reduced too. For proposals only: the sound layout keeps
  // such lines whole (shape_reduction.h).
  explicit LineMaps(const AxisLines& lines, bool periodic = false) : lines_(lines) {
    for (int a = 0; a < lines.count(); ++a) {
      if (lines.is_value_node(a)) continue;
      auto [root, offset] = lines.find(a);
      bounds_[root].insert(offset);
      bounds_[root].insert(offset + lines.length(a));
    }
    if (periodic)
      for (auto [root, period] : lines.conflict_periods()) add_period(root, period);
    // Push product-line boundaries down to their major lines (repeatedly,
    // for nested products). A boundary inside a minor block (a slice of two
    // heads out of a group of four) has no major position: the line is
    // *cut*, and the caller breaks its product (AxisLines::break_products)
    // and lays the lines out again.
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [root, set] : bounds_) {
        const AxisLines::Product* p = lines.product_of(root);
        if (!p || cut_.count(root)) continue;
        auto [major_root, major_offset] = lines.find(p->major);
        int64_t whole_offset = lines.find(p->whole).second;
        int64_t m = lines.length(p->minor);
        for (int64_t b : set) {
          if ((b - whole_offset) % m != 0) {
            cut_.insert(root);
            break;
          }
          changed |= bounds_[major_root].insert(major_offset + (b - whole_offset) / m).second;
        }
      }
    }
  }

  // Boundaries every g positions from the line's first, g the gcd of the
  // period and the line's boundaries; a line that would get more than
  // kMaxPeriodBounds keeps its boundaries (and contradicts).
  void add_period(int root, int64_t period) {
    auto it = bounds_.find(root);
    if (it == bounds_.end() || period <= 0) return;
    std::set<int64_t>& set = it->second;
    const int64_t first = *set.begin(), last = *set.rbegin();
    int64_t g = period;
    for (int64_t b : set) g = std::gcd(g, b - first);
    if (g <= 0 || (last - first) / g > kMaxPeriodBounds) return;
    for (int64_t b = first; b <= last; b += g) set.insert(b);
  }
  static constexpr int64_t kMaxPeriodBounds = 4096;

  // Product lines a boundary cuts through a minor block of; any makes this
  // layout unusable (map() would be wrong on them).
  const std::set<int>& cut_products() const { return cut_; }

  // Lays out every line: pieces of frozen lines keep their length, others
  // min(length, cap) with cap from `caps` (default `piece`). May be called again.
  void build(const std::set<int>& frozen, const std::map<int, int64_t>& caps, int64_t piece = 2) {
    frozen_ = frozen;
    plain_.clear();
    product_memo_.clear();
    for (auto& [root, set] : bounds_) {
      auto cap = caps.find(root);
      int64_t limit = cap == caps.end() ? piece : cap->second;
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

  // unmap of the n reduced positions g0, g0+1, ... on line `root`, in one
  // pass: a product line unmaps its majors and one minor block once each,
  // where unmap() per position repeats the whole descent for every position
  // (a frozen line of 16k positions nested 8 products deep took minutes).
  std::vector<int64_t> unmap_run(int root, int64_t g0, int64_t n, int depth = 0) const {
    std::vector<int64_t> out;
    if (n <= 0) return out;
    out.reserve(static_cast<size_t>(n));
    const AxisLines::Product* prod = depth < 16 ? lines_.product_of(root) : nullptr;
    if (!prod) {
      const LineMap& m = plain_.at(root);
      for (int64_t g = g0; g < g0 + n; ++g) out.push_back(m.unmap(g));
      return out;
    }
    auto [major_root, major_offset] = lines_.find(prod->major);
    auto [minor_root, minor_offset] = lines_.find(prod->minor);
    const int64_t m = lines_.length(prod->minor);
    const int64_t m_reduced = reduced_length(prod->minor, depth + 1);
    const int64_t whole_offset = lines_.find(prod->whole).second;
    const int64_t first_major = g0 / m_reduced;
    const std::vector<int64_t> majors =
        unmap_run(major_root, first_major, (g0 + n - 1) / m_reduced - first_major + 1, depth + 1);
    const std::vector<int64_t> minors =
        unmap_run(minor_root, map(minor_root, minor_offset, depth + 1), m_reduced, depth + 1);
    for (int64_t g = g0; g < g0 + n; ++g)
      out.push_back(whole_offset + (majors[g / m_reduced - first_major] - major_offset) * m +
                    minors[g % m_reduced] - minor_offset);
    return out;
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
  std::set<int> cut_;
  mutable std::map<std::tuple<int, int64_t, int>, int64_t> product_memo_;
};

}  // namespace shardproof::reduction
