// The walk of compact_explore.h. Names are matched template to template: a
// reference and a declaration match when their literal texts are equal and
// every hole has the same value, which is solved for the one unknown (the
// micro-batch of the instance named) instead of searched for.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "engine/classes/compact_explore_impl.h"
#include "engine/stage/claim_cone.h"

namespace shardproof::compact {

Pattern pattern_of(const Template& t) {
  Pattern p;
  auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
  for (size_t i = 0; i < t.literals.size(); ++i) {
    const std::string& lit = t.literals[i];
    for (size_t k = 0; k < lit.size();) {
      if (!digit(lit[k])) {
        p.skeleton += lit[k++];
        continue;
      }
      if (k == 0 && i > 0) p.ok = false;  // digits right after a hole
      Affine a;
      while (k < lit.size() && digit(lit[k])) {
        if (a.constant > (int64_t{1} << 40)) p.ok = false;
        a.constant = a.constant * 10 + (lit[k++] - '0');
      }
      p.skeleton += '#';
      p.slots.push_back(a);
      p.written.push_back(1);
    }
    if (i < t.exprs.size()) {
      if (!p.skeleton.empty() && p.skeleton.back() == '#') p.ok = false;  // after digits
      p.skeleton += '#';
      p.slots.push_back(t.exprs[i]);
      p.written.push_back(t.exprs[i].is_constant() ? 1 : 0);
    }
  }
  return p;
}

Domain Explorer::Impl::domain_of(const Condition& on, const Condition& when,
                                 const Coord& shift) const {
  Domain d;
  for (int axis = 0; axis < kAxisCount; ++axis) d.hi[axis] = m.size(axis) - 1;
  for (const Condition* cond : {&on, &when})
    for (const Comparison& k : cond->all)
      for (int axis = 0; axis < kMbAxis; ++axis) {
        const int64_t a = k.diff.coef[axis], c = k.diff.constant;
        if (k.diff.mask() != (AxisMask{1} << axis) || (a != 1 && a != -1)) continue;
        // a*x + c op 0, with a = +-1: x op' -c*a.
        const int64_t root = -c * a;
        const Comparison::Op op = k.op;
        using Op = Comparison::Op;
        const bool upper = (a == 1) == (op == Op::Lt || op == Op::Le);
        if (op == Op::Eq) {
          d.lo[axis] = std::max(d.lo[axis], root);
          d.hi[axis] = std::min(d.hi[axis], root);
        } else if (upper) {
          d.hi[axis] = std::min(d.hi[axis], root - (op == Op::Lt || op == Op::Gt ? 1 : 0));
        } else {
          d.lo[axis] = std::max(d.lo[axis], root + (op == Op::Lt || op == Op::Gt ? 1 : 0));
        }
      }
  for (int axis = 0; axis < kMbAxis; ++axis) {
    d.lo[axis] += shift[axis];
    d.hi[axis] += shift[axis];
  }
  return d;
}

Explorer::Impl::Impl(const CompactGraph& graph) : g(graph), m(graph.mesh) {
  const Coord none{};
  for (uint32_t p = 0; p < g.programs.size(); ++p) {
    const Program& prog = g.programs[p];
    for (uint32_t t = 0; t < prog.tensors.size(); ++t) {
      const TensorTemplate& tt = prog.tensors[t];
      const Domain d = domain_of(prog.on, tt.when, none);
      if (const Pattern& n = pattern(tt.name); n.ok) decls[n.skeleton].push_back({p, t, 0, &n, d});
      if (tt.of && !tt.input && pattern(tt.of->tensor).ok)
        claims[pattern(tt.of->tensor).skeleton].push_back({p, t, 0, &pattern(tt.of->tensor), d});
    }
    for (uint32_t o = 0; o < prog.ops.size(); ++o) {
      const OpTemplate& op = prog.ops[o];
      // A send's out is named at the receiver.
      const Domain d = domain_of(prog.on, op.when, op.kind == Kind::Send ? op.to : none);
      for (uint32_t s = 0; s < op.out.size(); ++s)
        if (const Pattern& n = pattern(op.out[s]); n.ok)
          producers[n.skeleton].push_back({p, o, s, &n, d});
    }
  }
}

bool Explorer::Impl::holds(const Condition& cond, const Coord& c) {
  for (const Comparison& k : cond.all) {
    const int64_t v = k.diff.eval(c);
    bool ok = false;
    switch (k.op) {
      case Comparison::Op::Eq:
        ok = zero(v);
        break;
      case Comparison::Op::Lt:
        ok = !nonneg(v);
        break;
      case Comparison::Op::Le:
        ok = nonneg(-v);
        break;
      case Comparison::Op::Gt:
        ok = !nonneg(-v);
        break;
      case Comparison::Op::Ge:
        ok = nonneg(v);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

bool Explorer::Impl::in_mesh(const Coord& c, bool per_mb) {
  for (int axis : m.axes)
    if (!nonneg(c[axis]) || !nonneg(m.size(axis) - 1 - c[axis])) return false;
  if (per_mb && (!nonneg(c[kMbAxis]) || !nonneg(m.mb - 1 - c[kMbAxis]))) return false;
  return true;
}

std::vector<int64_t> Explorer::Impl::slots(const Template& t, const Coord& c) {
  const Pattern& p = pattern(t);
  if (!p.ok)
    throw ExploreError{"name \"" + t.eval(c) +
                       "\" has a hole next to digits; the class verifier cannot tell its "
                       "numbers apart"};
  std::vector<int64_t> v;
  v.reserve(p.slots.size());
  for (const Affine& a : p.slots) v.push_back(a.eval(c));
  return v;
}

std::pair<Ref, Coord> Explorer::Impl::declaration(const Template& ref, const Coord& at,
                                                  const Coord& dev) {
  auto name = [&] { return ref.eval(at); };
  const std::vector<int64_t> v = slots(ref, at);
  const Pattern& rp = pattern(ref);
  std::optional<std::pair<Ref, Coord>> found;
  for (const Ref& r : candidates(decls, decl_candidates, rp)) {
    const Program& p = g.programs[r.program];
    const TensorTemplate& t = p.tensors[r.element];
    if (std::optional<Coord> c = solve(*r.pattern, t.per_mb, p.on, t.when, v, dev, name)) {
      if (found)
        throw ExploreError{"tensor \"" + name() + "\" (at " + where(*c, t.per_mb) +
                           ") is declared by two templates"};
      found = std::make_pair(r, *c);
    }
  }
  if (!found)
    throw ExploreError{"tensor \"" + name() + "\" on device (" + where(dev, false) +
                       ") matches no tensor template the class verifier can relate to it "
                       "(undeclared, or declared with a different literal text)"};
  return *found;
}

std::optional<std::pair<Ref, Coord>> Explorer::Impl::producer(const Ref& r, const Coord& c) {
  const TensorTemplate& t = g.programs[r.program].tensors[r.element];
  const std::vector<int64_t> v = slots(t.name, c);
  const Pattern& tp = pattern(t.name);
  std::optional<std::pair<Ref, Coord>> found;
  auto name = [&] { return t.name.eval(c); };
  for (const Ref& o : candidates(producers, producer_candidates, tp)) {
    const Program& p = g.programs[o.program];
    const OpTemplate& op = p.ops[o.element];
    std::optional<Coord> at;
    if (op.kind == Kind::Send) {
      // A send's out is named at the receiver: solve there, then step back
      // (the sender's device and program tested first, as solve() does).
      static const Condition always;
      const bool on_first = !(p.on.mask() & (AxisMask{1} << kMbAxis));
      Coord from = c;
      for (int axis : m.axes) from[axis] -= op.to[axis];
      if (!in_mesh(from, false) || (on_first && !holds(p.on, from))) continue;
      at = solve(*o.pattern, op.per_mb, always, always, v, c, name);
      if (at) {
        for (int axis : m.axes) (*at)[axis] -= op.to[axis];
        if (!in_mesh(*at, op.per_mb) || (!on_first && !holds(p.on, *at)) || !holds(op.when, *at))
          at.reset();
      }
    } else {
      at = solve(*o.pattern, op.per_mb, p.on, op.when, v, c, name);
    }
    if (at) {
      if (found) throw ExploreError{"tensor \"" + name() + "\" is written by two op templates"};
      found = std::make_pair(o, *at);
    }
  }
  return found;
}

void Explorer::Impl::record_claim(const TensorTemplate& t, const Coord& c) {
  if (!t.of) return;
  const std::vector<int64_t> v = slots(t.of->tensor, c);
  const Pattern& p = pattern(t.of->tensor);
  for (size_t i = 0; i < v.size(); ++i) name_value(v[i], p.slots[i].coef[kPpAxis]);
}

// Writes out, for the walk, the outputs of op template `o` at its member
// instance `mc`: its tensors and the claims they make.
void Explorer::Impl::reach_outputs(const OpTemplate& o, const Coord& mc) {
  Coord dst = mc;
  if (o.kind == Kind::Send)
    for (int axis : m.axes) dst[axis] += o.to[axis];
  for (const Template& out : o.out) {
    auto [tr, tc] = declaration(out, dst, dst);
    sel->tensors[tr.program][tr.element].insert(pack(tc));
    sel->produced[tr.program][tr.element].insert(pack(tc));
    record_claim(g.programs[tr.program].tensors[tr.element], tc);
  }
}

namespace {

// The compact plan's instances as the claim cone walks them (claim_cone.h):
// what it reaches is added to the selection, every decision is recorded,
// and each instance's walk is a node of the record (kept across anchors).
class InstanceCone {
 public:
  using Tensor = std::pair<Ref, Coord>;  // template, instance coordinate
  struct Op {
    Ref ref;
    Coord at;    // the instance
    Coord lead;  // the instance a collective's members share, its key
  };
  using Impl = Explorer::Impl;

  // An op instance's inputs, each member's in turn, each member's outputs
  // reached before its inputs.
  class Operands {
   public:
    Operands(Impl& x, const Op& op)
        : x_(&x), o_(&x.g.programs[op.ref.program].ops[op.ref.element]) {
      // Attribute values are not recorded (docs/soundness.md, "Coordinate
      // classes"): a value that shape reduction maps is a position, uniform
      // over a box like a slice bound; any other is in the verdict key as
      // written, so equal keys at the corners make it constant on the box.
      int64_t n = 1;
      for (int axis : o_->group) n *= x.m.size(axis);
      for (int64_t j = 0; j < n; ++j)
        members_.push_back(o_->kind == Impl::Kind::Collective ? x.m.member(o_->group, op.lead, j)
                                                              : op.at);
    }
    std::optional<Tensor> next() {
      for (; member_ < members_.size(); ++member_, input_ = 0, outputs_reached_ = false) {
        const Coord& mc = members_[member_];
        if (!outputs_reached_) x_->reach_outputs(*o_, mc);
        outputs_reached_ = true;
        if (input_ < o_->in.size()) return x_->declaration(o_->in[input_++], mc, mc);
      }
      return std::nullopt;
    }

   private:
    Impl* x_;
    const OpTemplate* o_;
    std::vector<Coord> members_;
    size_t member_ = 0, input_ = 0;
    bool outputs_reached_ = false;
  };

  explicit InstanceCone(Impl& x) : x_(x) {}

  bool input(const Tensor& t) const { return decl(t).input; }
  bool claimed(const Tensor& t) const { return decl(t).of.has_value(); }
  // Every member of the group is a root (explore() walks them all), so one
  // reached through another stops there and is walked from itself.
  bool member(const Tensor&) const { return false; }
  void reach(const Tensor& t) {
    x_.sel->tensors[t.first.program][t.first.element].insert(x_.pack(t.second));
    x_.record_claim(decl(t), t.second);
  }
  bool stage_input(const Tensor&) { return true; }
  bool enter_tensor(const Tensor& t, bool root) { return x_.begin_node(key(t, root)); }
  void leave_tensor(const Tensor& t, bool root) { x_.end_node(key(t, root)); }
  Op producer(const Tensor& t) {
    std::optional<std::pair<Ref, Coord>> p = x_.producer(t.first, t.second);
    if (!p)
      throw ExploreError{"tensor \"" + decl(t).name.eval(t.second) +
                         "\" has no lineage and no op writes it"};
    const OpTemplate& o = x_.g.programs[p->first.program].ops[p->first.element];
    Coord lead = p->second;
    for (int axis : o.group) lead[axis] = 0;
    if (!o.per_mb) lead[kMbAxis] = 0;
    return {p->first, p->second, lead};
  }
  bool enter_op(const Op& op) { return x_.begin_node(key(op)); }
  void leave_op(const Op& op) { x_.end_node(key(op)); }
  Operands operands(const Op& op) {
    x_.sel->ops[op.ref.program][op.ref.element].insert(x_.pack(op.lead));
    return Operands(x_, op);
  }

 private:
  const TensorTemplate& decl(const Tensor& t) const {
    return x_.g.programs[t.first.program].tensors[t.first.element];
  }
  Impl::NodeKey key(const Tensor& t, bool root) const {
    return {t.first.program, t.first.element, x_.node_id(t.second),
            root ? Impl::kSeedWalk : Impl::kTensorWalk};
  }
  Impl::NodeKey key(const Op& op) const {
    return {op.ref.program, op.ref.element, x_.node_id(op.lead), Impl::kOpWalk};
  }

  Impl& x_;
};

}  // namespace

AnchorRecord Explorer::Impl::explore(const Coord& anchor, Selection& selection,
                                     Selection& checked) {
  // What an instance's walk added is not added again: one pair of
  // selections for the explorer's life.
  if ((sel && sel != &selection) || (checked_sel && checked_sel != &checked))
    throw std::logic_error("Explorer::explore: another selection than before");
  checked_sel = &checked;
  sel = &selection;
  hash = 0;
  count = 0;
  outer.clear();  // left by a walk that threw
  anchor_pp = anchor[kPpAxis];
  AnchorRecord rec;
  // A program whose "on" does not hold at the anchor runs nothing there
  // ("on" never mentions mb, nor an axis an op is read at 0 along: its
  // axes count for every template of the program).
  for (uint32_t p = 0; p < g.programs.size(); ++p) {
    const Program& prog = g.programs[p];
    if (!holds(prog.on, anchor)) continue;
    for (uint32_t e = 0; e < prog.tensors.size(); ++e) {
      const TensorTemplate& t = prog.tensors[e];
      if (!t.of || t.input) continue;
      Coord c = anchor;
      if (!t.per_mb) c[kMbAxis] = 0;
      if (!holds(t.when, c)) continue;
      rec.seeds.push_back({p, e, c});
      // A claim instance seen from another anchor (one that differs only
      // in axes the claim does not vary along) is one node.
      node({p, e, node_id(c), kSeedClaim}, [&] {
        const Ref self{p, e, 0};
        const std::vector<std::pair<Ref, Coord>>& members = group_of(self, c);
        bool has_self = false;
        for (const auto& [r, mc] : members)
          has_self |= r.program == p && r.element == e && pack(mc) == pack(c);
        if (!has_self)
          throw ExploreError{"internal: the claim group of \"" + t.name.eval(c) +
                             "\" does not hold it"};
        value(static_cast<int64_t>(members.size()));
        InstanceCone cone(*this);
        walk_claim_cone(cone, members);
      });
    }
  }
  // Every op the anchor's instances run, claimed or not, so that each
  // template's own rules are checked at every corner (dead code included).
  for (uint32_t p = 0; p < g.programs.size(); ++p) {
    const Program& prog = g.programs[p];
    if (!holds(prog.on, anchor)) continue;
    for (uint32_t e = 0; e < prog.ops.size(); ++e) {
      const OpTemplate& o = prog.ops[e];
      Coord c = anchor;
      if (!o.per_mb) c[kMbAxis] = 0;
      // Along an axis its rules do not depend on, the op is read at 0 only.
      const AxisMask relevant = op_rule_axes(prog, o);
      for (int axis = 0; axis < kAxisCount; ++axis)
        if (!(relevant & (AxisMask{1} << axis))) c[axis] = 0;
      if (o.kind == Kind::Send) {
        Coord dst = c;
        for (int axis : m.axes) dst[axis] += o.to[axis];
        if (!holds(o.when, c)) continue;
        if (!in_mesh(dst, o.per_mb))
          throw ExploreError{"send at (" + where(c, o.per_mb) + ") goes off the mesh"};
      } else if (!holds(o.when, c)) {
        continue;
      }
      shallow_op({p, e, 0}, c, checked);
    }
  }
  rec.decisions = hash;
  rec.decision_count = count;
  return rec;
}

Explorer::Explorer(const CompactGraph& g) : impl_(new Impl(g)) {}
Explorer::~Explorer() {
  delete impl_;
}
AnchorRecord Explorer::explore(const Coord& anchor, Selection& selection, Selection& checked) {
  return impl_->explore(anchor, selection, checked);
}

}  // namespace shardproof::compact
