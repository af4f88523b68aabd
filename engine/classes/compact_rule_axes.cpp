// The axes an op template's own rules can depend on (compact_explore_impl.h):
// along any other axis its instances are alike, so the explorer checks the
// op at coordinate 0 there only.
#include "engine/classes/compact_explore_impl.h"

namespace shardproof::compact {

int Explorer::Impl::self_axis(const Affine& a) {
  const AxisMask mask = a.mask();
  if (a.constant != 0 || mask == 0 || (mask & (mask - 1)) != 0) return -1;
  const int axis = __builtin_ctz(mask);
  return a.coef[axis] == 1 ? axis : -1;
}

AxisMask Explorer::Impl::lineage_mask(const TensorTemplate& t) {
  AxisMask m = t.when.mask();
  if (t.of) m |= t.of->mask();
  return m;
}

AxisMask Explorer::Impl::name_mask(const Template& ref) {
  const Pattern& rp = pattern(ref);
  if (!rp.ok) return ~AxisMask{0};
  AxisMask m = 0;
  for (const Affine& slot : rp.slots)
    if (self_axis(slot) < 0) m |= slot.mask();
  for (const Ref& r : candidates(decls, decl_candidates, rp)) {
    const TensorTemplate& t = g.programs[r.program].tensors[r.element];
    m |= g.programs[r.program].on.mask() | lineage_mask(t);
    for (size_t i = 0; i < r.pattern->slots.size() && i < rp.slots.size(); ++i) {
      const int mine = self_axis(rp.slots[i]), theirs = self_axis(r.pattern->slots[i]);
      if (mine != theirs)
        m |= rp.slots[i].mask() | r.pattern->slots[i].mask();
      else if (theirs < 0)
        m |= r.pattern->slots[i].mask();
    }
  }
  return m;
}

AxisMask Explorer::Impl::op_rule_axes(const Program& p, const OpTemplate& o) {
  auto it = rule_axes.find(&o);
  if (it != rule_axes.end()) return it->second;
  AxisMask m = p.on.mask() | o.when.mask();
  if (o.name) {
    const Pattern& np = pattern(*o.name);
    if (!np.ok) m |= o.name->mask();
    for (const Affine& slot : np.slots)
      if (self_axis(slot) < 0) m |= slot.mask();
  }
  for (const AttrTemplate& a : o.attrs) m |= a.mask();
  for (int axis = 0; axis < kAxisCount; ++axis)
    if (o.to[axis] != 0) m |= AxisMask{1} << axis;
  for (const Template& t : o.in) m |= name_mask(t);
  for (const Template& t : o.out) m |= name_mask(t);
  for (int axis : o.group) m &= ~(AxisMask{1} << axis);  // instances sit at the lead
  rule_axes.emplace(&o, m);
  return m;
}

void Explorer::Impl::shallow_op(const Ref& r, const Coord& at, Selection& into) {
  const OpTemplate& o = g.programs[r.program].ops[r.element];
  Coord lead = at;
  for (int axis : o.group) lead[axis] = 0;
  // Resolving the references decides (a sign per candidate): those
  // decisions are part of the record, kept per instance like a walk's.
  node({r.program, r.element, node_id(lead), kShallowOp}, [&] {
    into.ops[r.program][r.element].insert(pack(lead));
    int64_t n = 1;
    for (int axis : o.group) n *= m.size(axis);
    for (int64_t j = 0; j < n; ++j) {
      const Coord mc = o.kind == Kind::Collective ? m.member(o.group, lead, j) : at;
      Coord dst = mc;
      if (o.kind == Kind::Send)
        for (int axis : m.axes) dst[axis] += o.to[axis];
      for (const Template& out : o.out) {
        auto [tr, tc] = declaration(out, dst, dst);
        into.tensors[tr.program][tr.element].insert(pack(tc));
        into.produced[tr.program][tr.element].insert(pack(tc));
      }
      for (const Template& in : o.in) {
        auto [tr, tc] = declaration(in, mc, mc);
        into.tensors[tr.program][tr.element].insert(pack(tc));
      }
    }
  });
}

}  // namespace shardproof::compact
