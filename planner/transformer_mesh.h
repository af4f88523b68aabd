// The device mesh of a transformer layout in the compact form, and where
// each coordinate the builder computes with lives on it. The dp rank and
// the tp rank are mixed-radix numbers over their own axes (ranks keep their
// numbers: the axes are listed pp, dp's, cp, tp's), and so are the ranks of
// Megatron's expert mesh (the ep rank, the edp rank, the etp rank and the
// token split under --etp below tp), so that each of its groups is a set of
// axes and every name, slice and part is affine in them.
//
//   plain (ep 1 or ep = dp, etp = tp)   dp                  tp
//   expert mesh (1 < ep < dp)           dp (d / ep), ep     tp
//   etp < tp, ep | tp / etp ("A")       dp                  tp (j / ep), ep, etp
//   etp < tp, tp / etp | ep ("B")       dp (d / r), ep (r)  tp (j), etp
//
// with j = t / etp the token split and r = ep / (tp / etp): in A the ep
// rank is the ep axis and the edp rank dp*(tp/etp/ep) + tp; in B the ep rank
// is ep*(tp/etp) + tp and the edp rank the dp axis (docs/planner-moe.md).
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "planner/affine.h"
#include "planner/compact_builder.h"
#include "planner/transformer_graph.h"

namespace shardproof::planner::transformer {

struct Layout;

class CompactMesh {
 public:
  using Axes = std::vector<std::string>;
  // Throws std::invalid_argument when unsupported() is not empty.
  explicit CompactMesh(const Layout& s);
  // Why the layout has no such mesh ("" when it has one).
  static std::string unsupported(const Layout& s);

  // The device axes and their sizes, slowest first (rank order).
  std::vector<std::pair<std::string, int>> axes() const;
  int size(const std::string& axis) const;

  // The axes (slowest first) whose mixed-radix number each rank is.
  Axes dp_axes() const { return names(dp_); }
  Axes tp_axes() const { return names(tp_); }
  const Axes& ep_axes() const { return ep_; }
  const Axes& edp_axes() const { return edp_; }
  const Axes& etp_axes() const { return etp_; }
  const Axes& split_axes() const { return split_; }

  // The dp and tp rank of the symbolic device (every axis itself).
  Ix dp() const;
  Ix tp() const;
  // The number `digits` spell at x (x.d and x.t read as digits on their axes).
  Aff number(const Coord& x, const Axes& digits) const;
  // x with the axes `axes` set to 0 (a group's first member along them),
  // or to themselves (every member).
  Coord zeroed(Coord x, const Axes& axes) const;
  Coord spanned(Coord x, const Axes& axes) const;
  // The axes along which rank r's coordinates are not 0.
  std::set<std::string> nonzero_axes(int r) const;
  // "tp == 0" on every tp axis, and the disjoint conditions of the rest.
  std::string tp0() const;
  std::vector<std::string> tp_rest() const;

 private:
  using Digits = std::vector<std::pair<std::string, int>>;
  static Axes names(const Digits& d);
  // Each axis of x.d, x.c, x.t as an affine value (itself, or a constant).
  std::vector<std::pair<std::string, Aff>> digits(const Coord& x) const;
  Coord rebuilt(Coord x, const std::vector<std::pair<std::string, Aff>>& d) const;

  int pp_, cp_;
  Digits dp_, tp_;
  Axes ep_, edp_, etp_, split_;
};

}  // namespace shardproof::planner::transformer
