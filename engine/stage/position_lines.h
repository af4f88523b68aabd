// Position lines: which lines integers name, their piece caps and the
// reduced values of integer constants (docs/soundness.md, 3.1).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <vector>

#include "engine/stage/line_maps.h"
#include "engine/stage/position_facts.h"

namespace shardproof::reduction {

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

}  // namespace shardproof::reduction
