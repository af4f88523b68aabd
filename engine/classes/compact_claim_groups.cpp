// A claim's group in a compact plan (compact_explore_impl.h): every instance
// of a claim template that claims what a seed instance claims, found by
// solving the equations of names, slices, parts and restricted sets.
#include <algorithm>
#include <cstdlib>

#include "engine/classes/compact_explore_impl.h"

namespace shardproof::compact {

std::optional<int64_t> Explorer::Impl::pinned_by(const Condition& cond, int axis) {
  for (const Comparison& k : cond.all) {
    const int64_t coef = k.diff.coef[axis];
    if (k.op != Comparison::Op::Eq || k.diff.mask() != (AxisMask{1} << axis)) continue;
    if (coef == 1 || coef == -1) return -k.diff.constant * coef;
  }
  return std::nullopt;
}

void Explorer::Impl::search(const Ref& u, const std::vector<Equation>& eqs,
                            const std::vector<Axis>& axes, size_t depth, const Coord& seed, Coord c,
                            std::vector<std::pair<Ref, Coord>>& out) {
  for (const Equation& e : eqs) {
    int64_t lo = e.lhs.constant, hi = e.lhs.constant;
    for (size_t i = 0; i < axes.size(); ++i) {
      const int a = axes[i].axis;
      const int64_t k = e.lhs.coef[a];
      if (k == 0) continue;
      if (i < depth) {
        lo += k * c[a];
        hi += k * c[a];
      } else {  // relative: seed +- (n-1)
        const int64_t span = k * (axes[i].size - 1);
        lo += k * seed[a] - (span < 0 ? -span : span);
        hi += k * seed[a] + (span < 0 ? -span : span);
      }
    }
    if (!nonneg(e.rhs - lo) || !nonneg(hi - e.rhs)) return;
  }
  if (depth == axes.size()) {
    for (const Axis& x : axes)
      if (x.relative && (!nonneg(c[x.axis]) || !nonneg(x.size - 1 - c[x.axis]))) return;
    const Program& p = g.programs[u.program];
    const TensorTemplate& t = p.tensors[u.element];
    if (holds(p.on, c) && holds(t.when, c)) out.emplace_back(u, c);
    return;
  }
  const Axis& x = axes[depth];
  if (x.pinned) {  // the template exists nowhere else along it
    if (*x.pinned < 0 || *x.pinned >= x.size) return;
    c[x.axis] = *x.pinned;
    search(u, eqs, axes, depth + 1, seed, c, out);
    return;
  }
  for (int64_t v = x.relative ? 1 - x.size : 0; v < x.size; ++v) {
    c[x.axis] = x.relative ? seed[x.axis] + v : v;
    search(u, eqs, axes, depth + 1, seed, c, out);
  }
}

const std::vector<std::pair<Ref, Coord>>& Explorer::Impl::group_of(const Ref& seed,
                                                                   const Coord& c) {
  const NodeKey key{seed.program, seed.element, node_id(c), kSeedWalk};
  auto it = groups.find(key);
  if (it == groups.end()) {
    std::vector<std::pair<Ref, Coord>> members;
    const uint64_t h = hash_of(0x67726f7570ull, [&] { members = group(seed, c); });
    it = groups.emplace(key, Group{std::move(members), h}).first;
  }
  mix(it->second.hash);
  return it->second.members;
}

bool Explorer::Impl::lengths_apart(const std::pair<Affine, Affine>& a,
                                   const std::pair<Affine, Affine>& b) {
  auto length = [](const std::pair<Affine, Affine>& r) {
    Affine l = r.second;
    l.constant -= r.first.constant;
    for (int axis = 0; axis < kAxisCount; ++axis) l.coef[axis] -= r.first.coef[axis];
    return l;
  };
  const Affine la = length(a), lb = length(b);
  return la.is_constant() && lb.is_constant() && la.constant != lb.constant;
}

bool Explorer::Impl::gapped(const OverTemplate& o) {
  if (!o.strided || !o.count.is_constant() || o.count.constant < 2) return false;
  Affine gap = o.step;
  gap.constant -= o.hi.constant - o.lo.constant;
  for (int axis = 0; axis < kAxisCount; ++axis) gap.coef[axis] -= o.hi.coef[axis] - o.lo.coef[axis];
  return gap.is_constant() && gap.constant > 0;
}

bool Explorer::Impl::claims_apart(const Lineage& ul, const Lineage& lin) {
  if (ul.has_slice != lin.has_slice || ul.slice.size() != lin.slice.size())
    throw ExploreError{
        "claims of one logical tensor written with and without a slice (or with "
        "different ranks); the class verifier needs one form"};
  bool apart = false;
  for (size_t d = 0; d < ul.slice.size(); ++d) apart |= lengths_apart(ul.slice[d], lin.slice[d]);
  for (size_t a = 0; a < ul.over.size(); ++a) {
    const OverTemplate &uo = ul.over[a], &lo = lin.over[a];
    if (uo.strided != lo.strided) {
      // A block and blocks with gaps between them are never one set; a
      // step whose blocks may touch would need the v1 reader's merging.
      if (!gapped(uo) && !gapped(lo))
        throw ExploreError{
            "restricted claims of one logical tensor written with and without a step, "
            "whose blocks may touch; the class verifier needs one form"};
      apart = true;
    }
    apart |= lengths_apart({uo.lo, uo.hi}, {lo.lo, lo.hi});
  }
  return apart;
}

std::vector<Explorer::Impl::Axis> Explorer::Impl::search_axes(
    const Ref& u, const std::vector<Equation>& eqs) const {
  const TensorTemplate& t = g.programs[u.program].tensors[u.element];
  std::vector<int> all(m.axes.begin(), m.axes.end());
  if (t.per_mb) all.push_back(kMbAxis);
  std::vector<Axis> axes;
  for (int a : all) {
    bool mentioned = false;
    for (const Equation& e : eqs) mentioned |= e.lhs.coef[a] != 0;
    std::optional<int64_t> pinned;
    if (!mentioned) pinned = pinned_by(g.programs[u.program].on, a);
    if (!mentioned && !pinned) pinned = pinned_by(t.when, a);
    axes.push_back({a, mentioned, a == kMbAxis ? m.mb : m.size(a), pinned});
  }
  // Relative axes first: the equations prune them before the others multiply.
  std::stable_partition(axes.begin(), axes.end(), [](const Axis& x) { return x.relative; });
  // Among them, the widest first: the axis whose term spans most of an
  // equation's range is fixed first, so the bounds prune each level to
  // a value or two (a micro-batch stride of 131072 rows before the dp
  // rank's 4096) instead of trying every value below it. The order is a
  // fact of the plan (coefficients and sizes), the same at every anchor.
  auto span = [&](const Axis& x) {
    int64_t widest = 0;
    for (const Equation& e : eqs)
      widest = std::max(widest, std::abs(e.lhs.coef[x.axis]) * (x.size - 1));
    return widest;
  };
  const auto relative_end =
      std::find_if(axes.begin(), axes.end(), [](const Axis& x) { return !x.relative; });
  std::stable_sort(axes.begin(), relative_end,
                   [&](const Axis& a, const Axis& b) { return span(a) > span(b); });
  return axes;
}

std::vector<std::pair<Ref, Coord>> Explorer::Impl::group(const Ref& seed, const Coord& c) {
  const TensorTemplate& s = g.programs[seed.program].tensors[seed.element];
  const Lineage& lin = *s.of;
  std::vector<std::pair<Ref, Coord>> members;
  const std::vector<int64_t> tv = slots(lin.tensor, c);
  const Pattern& lp = pattern(lin.tensor);
  const Program& sp = g.programs[seed.program];
  const Domain own = domain_of(sp.on, s.when, Coord{});
  for (const Ref& u : candidates(claims, claim_candidates, lp, Compared::AcrossCoordinates, &own)) {
    const TensorTemplate& t = g.programs[u.program].tensors[u.element];
    const Lineage& ul = *t.of;
    if (ul.has_part != lin.has_part || ul.over.size() != lin.over.size()) continue;
    if (claims_apart(ul, lin)) continue;
    std::vector<Equation> eqs;
    const Pattern& up = *u.pattern;
    for (size_t i = 0; i < up.slots.size(); ++i) eqs.push_back({up.slots[i], tv[i]});
    for (size_t d = 0; d < ul.slice.size(); ++d) {
      eqs.push_back({ul.slice[d].first, lin.slice[d].first.eval(c)});
      eqs.push_back({ul.slice[d].second, lin.slice[d].second.eval(c)});
    }
    if (ul.has_part) eqs.push_back({ul.part_n, lin.part_n.eval(c)});
    for (size_t a = 0; a < ul.over.size(); ++a) {
      const OverTemplate &uo = ul.over[a], &lo = lin.over[a];
      eqs.push_back({uo.lo, lo.lo.eval(c)});
      eqs.push_back({uo.hi, lo.hi.eval(c)});
      if (uo.strided) {
        eqs.push_back({uo.step, lo.step.eval(c)});
        eqs.push_back({uo.count, lo.count.eval(c)});
      }
    }
    search(u, eqs, search_axes(u, eqs), 0, c, Coord{}, members);
  }
  return members;
}

}  // namespace shardproof::compact
