// The walk of compact_explore.h. Names are matched template to template: a
// reference and a declaration match when their literal texts are equal and
// every hole has the same value, which is solved for the one unknown (the
// micro-batch of the instance named) instead of searched for.
#include "engine/classes/compact_explore.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>

namespace shardproof::compact {
namespace {

using Kind = OpTemplate::Kind;

// A name as its text around its numbers: every run of digits, written or
// made by a hole, is a *slot*; the skeleton is the text with each slot as
// '#'. "dp{dp}.l0.acc{mb-1}" has skeleton "dp#.l#.acc#" and slots (dp, 0,
// mb-1). Two names are equal when their skeletons are and every slot has the
// same value, whichever of them were written as digits. A hole next to
// digits would make the slots ambiguous: such a template has no pattern.
struct Pattern {
  bool ok = true;
  std::string skeleton;
  std::vector<Affine> slots;
  std::vector<char> written;  // slot i is a constant (digits, or a constant hole)
};

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

struct Ref {
  uint32_t program, element, slot;
  const Pattern* pattern = nullptr;  // of the name it is indexed by
};

}  // namespace

struct Explorer::Impl {
  const CompactGraph& g;
  const Mesh& m;
  std::unordered_map<std::string, std::vector<Ref>> decls;      // tensor templates by name
  std::unordered_map<std::string, std::vector<Ref>> producers;  // op outputs by name
  std::unordered_map<std::string, std::vector<Ref>> claims;     // claims by logical name

  std::unordered_map<const Template*, Pattern> patterns;
  const Pattern& pattern(const Template& t) {
    auto it = patterns.find(&t);
    if (it == patterns.end()) it = patterns.emplace(&t, pattern_of(t)).first;
    return it->second;
  }

  // The templates under a pattern's skeleton in `index` that no slot both
  // write as digits tells apart from it ("l3" and "l7"): a fact of the plan,
  // kept per pattern, so a lookup does not scan every layer's templates.
  using Index = std::unordered_map<std::string, std::vector<Ref>>;
  using Candidates = std::unordered_map<const Pattern*, std::vector<Ref>>;
  Candidates decl_candidates, producer_candidates, claim_candidates;
  const std::vector<Ref>& candidates(const Index& index, Candidates& memo, const Pattern& p) {
    auto [it, fresh] = memo.try_emplace(&p);
    if (fresh)
      if (auto found = index.find(p.skeleton); found != index.end())
        for (const Ref& r : found->second)
          if (!written_apart(p, *r.pattern)) it->second.push_back(r);
    return it->second;
  }

  // The walk in progress.
  Selection* sel = nullptr;
  Selection* checked_sel = nullptr;
  uint64_t hash = 0;
  int64_t count = 0;

  // The walk behind an instance (a tensor to its producer, an op to its
  // operands) depends on that instance alone, so its record is kept as one
  // hash per instance, across anchors: a node's hash covers its own
  // decisions and its children's hashes in order (a Merkle hash of the
  // unfolded walk), and every anchor that reaches the instance mixes it in
  // without walking again. Equal hashes still mean equal decisions.
  struct NodeKey {
    uint32_t program, element;
    int64_t packed;
    int kind;  // Node
    bool operator==(const NodeKey& o) const {
      return program == o.program && element == o.element && packed == o.packed && kind == o.kind;
    }
  };
  struct NodeKeyHash {
    size_t operator()(const NodeKey& k) const {
      // splitmix64's finaliser over all fields: every input bit reaches
      // every output bit, so buckets stay short.
      uint64_t h = (static_cast<uint64_t>(k.program) << 40) ^
                   (static_cast<uint64_t>(k.element) << 8) ^ static_cast<uint64_t>(k.kind);
      h ^= static_cast<uint64_t>(k.packed) * 0x9e3779b97f4a7c15ull;
      h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
      h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
      return static_cast<size_t>(h ^ (h >> 31));
    }
  };
  enum Node { kTensorWalk, kSeedWalk, kOpWalk, kShallowOp, kSeedClaim };
  // Sentinel for a node being walked: reaching it again closes a cycle,
  // which the expansion's own validation reports.
  static constexpr uint64_t kInProgress = 0x6379636c65ull;
  std::unordered_map<NodeKey, uint64_t, NodeKeyHash> nodes;

  // Runs `walk` as node `key` (once per instance), mixing its hash into the
  // record of the walk in progress.
  template <class Walk>
  void node(const NodeKey& key, Walk walk) {
    auto [it, fresh] = nodes.try_emplace(key, kInProgress);
    if (!fresh) {
      mix(it->second);
      return;
    }
    const uint64_t mine = hash_of(0x6e6f6465ull ^ static_cast<uint64_t>(key.kind), walk);
    nodes[key] = mine;
    mix(mine);
  }

  // The hash of what `part` records, started from `start`, apart from the
  // record in progress (left as it was).
  template <class Part>
  uint64_t hash_of(uint64_t start, Part part) {
    const uint64_t outer_hash = hash;
    const int64_t outer_count = count;
    hash = start;
    part();
    const uint64_t mine = hash;
    hash = outer_hash;
    count = outer_count;
    return mine;
  }

  // Claim groups by seed instance: the members and the hash of the search.
  struct Group {
    std::vector<std::pair<Ref, Coord>> members;
    uint64_t hash;
  };
  std::unordered_map<NodeKey, Group, NodeKeyHash> groups;

  explicit Impl(const CompactGraph& graph) : g(graph), m(graph.mesh) {
    for (uint32_t p = 0; p < g.programs.size(); ++p) {
      const Program& prog = g.programs[p];
      for (uint32_t t = 0; t < prog.tensors.size(); ++t) {
        const TensorTemplate& tt = prog.tensors[t];
        if (const Pattern& n = pattern(tt.name); n.ok) decls[n.skeleton].push_back({p, t, 0, &n});
        if (tt.of && !tt.input && pattern(tt.of->tensor).ok)
          claims[pattern(tt.of->tensor).skeleton].push_back({p, t, 0, &pattern(tt.of->tensor)});
      }
      for (uint32_t o = 0; o < prog.ops.size(); ++o)
        for (uint32_t s = 0; s < prog.ops[o].out.size(); ++s)
          if (const Pattern& n = pattern(prog.ops[o].out[s]); n.ok)
            producers[n.skeleton].push_back({p, o, s, &n});
    }
  }

  // ---- recording ----------------------------------------------------------
  void mix(uint64_t v) {
    hash ^= v + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
    hash *= 0xff51afd7ed558ccdull;
    ++count;
  }
  // The sign of an affine quantity of the anchor, recorded.
  int sign(int64_t v) {
    int s = (v > 0) - (v < 0);
    mix(static_cast<uint64_t>(s + 2));
    return s;
  }
  bool zero(int64_t v) { return sign(v) == 0; }
  bool nonneg(int64_t v) { return sign(v) >= 0; }
  void value(int64_t v) { mix(static_cast<uint64_t>(v) ^ 0xa5a5a5a5a5a5a5a5ull); }

  bool holds(const Condition& cond, const Coord& c) {
    for (const Comparison& k : cond.all) {
      int s = sign(k.diff.eval(c));
      bool ok = false;
      switch (k.op) {
        case Comparison::Op::Eq:
          ok = s == 0;
          break;
        case Comparison::Op::Lt:
          ok = s < 0;
          break;
        case Comparison::Op::Le:
          ok = s <= 0;
          break;
        case Comparison::Op::Gt:
          ok = s > 0;
          break;
        case Comparison::Op::Ge:
          ok = s >= 0;
          break;
      }
      if (!ok) return false;
    }
    return true;
  }
  bool in_mesh(const Coord& c, bool per_mb) {
    for (int axis : m.axes)
      if (!nonneg(c[axis]) || !nonneg(m.size(axis) - 1 - c[axis])) return false;
    if (per_mb && (!nonneg(c[kMbAxis]) || !nonneg(m.mb - 1 - c[kMbAxis]))) return false;
    return true;
  }

  // ---- keys ---------------------------------------------------------------
  int64_t pack(const Coord& c) const { return m.pack(c); }
  std::string where(const Coord& c, bool per_mb) const { return m.describe(c, per_mb); }

  // ---- matching a name to a template --------------------------------------
  // The coordinate at which `target` (its device part fixed by `dev`) gives
  // the hole values `v`, or nothing. The micro-batch is solved from a hole
  // with coefficient +-1 on mb, or from an equality of the domain.
  template <class What>
  std::optional<Coord> solve(const Pattern& target, bool per_mb, const Condition& on,
                             const Condition& when, const std::vector<int64_t>& v, Coord dev,
                             What what) {
    dev[kMbAxis] = 0;
    if (per_mb) {
      bool solved = false;
      for (size_t i = 0; i < target.slots.size() && !solved; ++i) {
        int64_t k = target.slots[i].coef[kMbAxis];
        if (k == 1 || k == -1) {
          dev[kMbAxis] = (v[i] - target.slots[i].eval(dev)) * k;
          solved = true;
        }
      }
      for (const Condition* cond : {&on, &when})
        for (const Comparison& cmp : cond->all) {
          int64_t k = cmp.diff.coef[kMbAxis];
          if (solved || cmp.op != Comparison::Op::Eq || (k != 1 && k != -1)) continue;
          dev[kMbAxis] = -cmp.diff.eval(dev) * k;
          solved = true;
        }
      if (!solved)
        throw ExploreError{what() +
                           ": a per-micro-batch name the class verifier cannot solve for mb (it "
                           "needs a hole mb + c, or an equality on mb)"};
    }
    for (size_t i = 0; i < v.size(); ++i)
      if (!zero(v[i] - target.slots[i].eval(dev))) return std::nullopt;
    if (!in_mesh(dev, per_mb) || !holds(on, dev) || !holds(when, dev)) return std::nullopt;
    return dev;
  }

  // Whether two patterns differ in a slot both write as digits ("l3" and
  // "l7"): a fact of the plan, not of the anchor, so nothing is recorded.
  static bool written_apart(const Pattern& a, const Pattern& b) {
    for (size_t i = 0; i < a.slots.size() && i < b.slots.size(); ++i)
      if (a.written[i] && b.written[i] && a.slots[i].constant != b.slots[i].constant) return true;
    return false;
  }

  // The values of a pattern's slots at `c`; throws if it has no pattern.
  std::vector<int64_t> slots(const Template& t, const Coord& c) {
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

  // The tensor instance that `ref`, evaluated at `at`, names on the device
  // `dev`.
  std::pair<Ref, Coord> declaration(const Template& ref, const Coord& at, const Coord& dev) {
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

  // The op instance (template, instance coordinate) that writes tensor
  // instance (r, c), if any.
  std::optional<std::pair<Ref, Coord>> producer(const Ref& r, const Coord& c) {
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
        // A send's out is named at the receiver: solve there, then step back.
        static const Condition always;
        at = solve(*o.pattern, op.per_mb, always, always, v, c, name);
        if (at) {
          for (int axis : m.axes) (*at)[axis] -= op.to[axis];
          if (!in_mesh(*at, op.per_mb) || !holds(p.on, *at) || !holds(op.when, *at)) at.reset();
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

  // ---- the walk -----------------------------------------------------------
  void record_claim(const TensorTemplate& t, const Coord& c) {
    if (!t.of) return;
    for (int64_t v : slots(t.of->tensor, c)) value(v);
  }

  // Visits a tensor instance; walks to its producer unless it is claimed
  // (a stage input) and not a `seed` (a member of the claim group walked).
  void tensor(const Ref& r, const Coord& c, bool seed) {
    const TensorTemplate& t = g.programs[r.program].tensors[r.element];
    const int64_t key = pack(c);
    sel->tensors[r.program][r.element].insert(key);
    record_claim(t, c);
    if (t.input || (t.of && !seed)) return;
    node({r.program, r.element, key, seed ? kSeedWalk : kTensorWalk}, [&] {
      std::optional<std::pair<Ref, Coord>> p = producer(r, c);
      if (!p)
        throw ExploreError{"tensor \"" + t.name.eval(c) + "\" has no lineage and no op writes it"};
      op(p->first, p->second);
    });
  }

  void op(const Ref& r, const Coord& at) {
    const OpTemplate& o = g.programs[r.program].ops[r.element];
    Coord lead = at;
    for (int axis : o.group) lead[axis] = 0;
    if (!o.per_mb) lead[kMbAxis] = 0;
    const int64_t key = pack(lead);
    node({r.program, r.element, key, kOpWalk}, [&] { op_walk(r, o, at, lead, key); });
  }

  void op_walk(const Ref& r, const OpTemplate& o, const Coord& at, const Coord& lead, int64_t key) {
    sel->ops[r.program][r.element].insert(key);
    // Attribute values are not recorded (docs/soundness.md, "Coordinate
    // classes"): a value that shape reduction maps is a position, uniform
    // over a box like a slice bound; any other is in the verdict key as
    // written, so equal keys at the corners make it constant on the box.
    std::vector<Coord> members;
    int64_t n = 1;
    for (int axis : o.group) n *= m.size(axis);
    for (int64_t j = 0; j < n; ++j)
      members.push_back(o.kind == Kind::Collective ? m.member(o.group, lead, j) : at);
    for (const Coord& mc : members) {
      Coord dst = mc;
      if (o.kind == Kind::Send)
        for (int axis : m.axes) dst[axis] += o.to[axis];
      for (const Template& out : o.out) {
        auto [tr, tc] = declaration(out, dst, dst);
        sel->tensors[tr.program][tr.element].insert(pack(tc));
        sel->produced[tr.program][tr.element].insert(pack(tc));
        record_claim(g.programs[tr.program].tensors[tr.element], tc);
      }
      for (const Template& in : o.in) {
        auto [tr, tc] = declaration(in, mc, mc);
        tensor(tr, tc, false);
      }
    }
  }

  // ---- claim groups -------------------------------------------------------
  // Every instance of a claim template that claims what `seed` claims at `c`.
  struct Equation {
    Affine lhs;
    int64_t rhs;
  };

  // Axes an equation mentions are enumerated *relative to the seed* (delta
  // from -(n-1) to n-1), others by absolute value, and equations are tested
  // before ranges: then every recorded sign is a fixed affine function of
  // the anchor (a constant, mostly), not a comparison of the anchor with an
  // enumerated number, which would differ between the corners of a class.
  struct Axis {
    int axis;
    bool relative;
    int64_t size;
    std::optional<int64_t> pinned;  // an absolute axis an equality of the template fixes
  };

  // The value `axis` must take for `cond` to hold, when one of its
  // comparisons is an equality on that axis alone ("pp == 3").
  static std::optional<int64_t> pinned_by(const Condition& cond, int axis) {
    for (const Comparison& k : cond.all) {
      const int64_t coef = k.diff.coef[axis];
      if (k.op != Comparison::Op::Eq || k.diff.mask() != (AxisMask{1} << axis)) continue;
      if (coef == 1 || coef == -1) return -k.diff.constant * coef;
    }
    return std::nullopt;
  }

  void search(const Ref& u, const std::vector<Equation>& eqs, const std::vector<Axis>& axes,
              size_t depth, const Coord& seed, Coord c, std::vector<std::pair<Ref, Coord>>& out) {
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
      if (sign(e.rhs - lo) < 0 || sign(hi - e.rhs) < 0) return;
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

  // The claim group of the seed instance, searched once per instance; its
  // search's record is mixed into the walk in progress.
  const std::vector<std::pair<Ref, Coord>>& group_of(const Ref& seed, const Coord& c) {
    const NodeKey key{seed.program, seed.element, pack(c), kSeedWalk};
    auto it = groups.find(key);
    if (it == groups.end()) {
      std::vector<std::pair<Ref, Coord>> members;
      const uint64_t h = hash_of(0x67726f7570ull, [&] { members = group(seed, c); });
      it = groups.emplace(key, Group{std::move(members), h}).first;
    }
    mix(it->second.hash);
    return it->second.members;
  }

  // Whether two ranges can never be equal: their lengths are different
  // constants (a fact of the plan, not of the anchor, so nothing is
  // recorded; searching would record signs that vary with the anchor, such
  // as 32*dp' = 0 for a block of one dp rank against a whole dim).
  static bool lengths_apart(const std::pair<Affine, Affine>& a,
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

  // Whether a restricted claim's axis is, at every coordinate, several
  // blocks with gaps between them (constant count above 1, constant gap).
  static bool gapped(const OverTemplate& o) {
    if (!o.strided || !o.count.is_constant() || o.count.constant < 2) return false;
    Affine gap = o.step;
    gap.constant -= o.hi.constant - o.lo.constant;
    for (int axis = 0; axis < kAxisCount; ++axis)
      gap.coef[axis] -= o.hi.coef[axis] - o.lo.coef[axis];
    return gap.is_constant() && gap.constant > 0;
  }

  std::vector<std::pair<Ref, Coord>> group(const Ref& seed, const Coord& c) {
    const TensorTemplate& s = g.programs[seed.program].tensors[seed.element];
    const Lineage& lin = *s.of;
    std::vector<std::pair<Ref, Coord>> members;
    const std::vector<int64_t> tv = slots(lin.tensor, c);
    const Pattern& lp = pattern(lin.tensor);
    for (const Ref& u : candidates(claims, claim_candidates, lp)) {
      const TensorTemplate& t = g.programs[u.program].tensors[u.element];
      const Lineage& ul = *t.of;
      if (ul.has_part != lin.has_part || ul.over.size() != lin.over.size()) continue;
      if (ul.has_slice != lin.has_slice || ul.slice.size() != lin.slice.size())
        throw ExploreError{
            "claims of one logical tensor written with and without a slice (or with "
            "different ranks); the class verifier needs one form"};
      bool apart = false;
      for (size_t d = 0; d < ul.slice.size(); ++d)
        apart |= lengths_apart(ul.slice[d], lin.slice[d]);
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
      if (apart) continue;
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
      search(u, eqs, axes, 0, c, Coord{}, members);
    }
    return members;
  }

  // ---- the axes an op's own rules can depend on ---------------------------
  // A slot that is the device's own coordinate on one axis ("dp{dp}") names
  // the same tensor on every device along it; any other use of an axis (a
  // condition, an attribute, a send's offset, a slot such as mb-1, a
  // lineage slice of a tensor the op names, or a candidate declaration that
  // does not use the axis the same way) can make instances along it differ.
  static int self_axis(const Affine& a) {
    const AxisMask mask = a.mask();
    if (a.constant != 0 || mask == 0 || (mask & (mask - 1)) != 0) return -1;
    const int axis = __builtin_ctz(mask);
    return a.coef[axis] == 1 ? axis : -1;
  }
  static AxisMask lineage_mask(const TensorTemplate& t) {
    AxisMask m = t.when.mask();
    if (t.of) m |= t.of->mask();
    return m;
  }
  AxisMask name_mask(const Template& ref) {
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
  std::unordered_map<const OpTemplate*, AxisMask> rule_axes;
  AxisMask op_rule_axes(const Program& p, const OpTemplate& o) {
    auto it = rule_axes.find(&o);
    if (it != rule_axes.end()) return it->second;
    AxisMask m = p.on.mask() | o.when.mask();
    if (o.name) {
      const Pattern& np = pattern(*o.name);
      if (!np.ok) m |= o.name->mask();
      for (const Affine& slot : np.slots)
        if (self_axis(slot) < 0) m |= slot.mask();
    }
    for (const AttrTemplate& a : o.attrs)
      if (a.expr) m |= a.expr->mask();
    for (int axis = 0; axis < kAxisCount; ++axis)
      if (o.to[axis] != 0) m |= AxisMask{1} << axis;
    for (const Template& t : o.in) m |= name_mask(t);
    for (const Template& t : o.out) m |= name_mask(t);
    for (int axis : o.group) m &= ~(AxisMask{1} << axis);  // instances sit at the lead
    rule_axes.emplace(&o, m);
    return m;
  }

  // Adds op instance (r, at) and the tensors it names to `into`, without
  // walking to producers: enough for the op's own rules.
  void shallow_op(const Ref& r, const Coord& at, Selection& into) {
    const OpTemplate& o = g.programs[r.program].ops[r.element];
    Coord lead = at;
    for (int axis : o.group) lead[axis] = 0;
    // Resolving the references decides (a sign per candidate): those
    // decisions are part of the record, kept per instance like a walk's.
    node({r.program, r.element, pack(lead), kShallowOp}, [&] {
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

  AnchorRecord explore(const Coord& anchor, Selection& selection, Selection& checked) {
    // What an instance's walk added is not added again: one pair of
    // selections for the explorer's life.
    if ((sel && sel != &selection) || (checked_sel && checked_sel != &checked))
      throw std::logic_error("Explorer::explore: another selection than before");
    checked_sel = &checked;
    sel = &selection;
    hash = 0;
    count = 0;
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
        node({p, e, pack(c), kSeedClaim}, [&] {
          const Ref self{p, e, 0};
          const std::vector<std::pair<Ref, Coord>>& members = group_of(self, c);
          bool has_self = false;
          for (const auto& [r, mc] : members)
            has_self |= r.program == p && r.element == e && pack(mc) == pack(c);
          if (!has_self)
            throw ExploreError{"internal: the claim group of \"" + t.name.eval(c) +
                               "\" does not hold it"};
          value(static_cast<int64_t>(members.size()));
          for (const auto& [r, mc] : members) tensor(r, mc, true);
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
};

Explorer::Explorer(const CompactGraph& g) : impl_(new Impl(g)) {}
Explorer::~Explorer() {
  delete impl_;
}
AnchorRecord Explorer::explore(const Coord& anchor, Selection& selection, Selection& checked) {
  return impl_->explore(anchor, selection, checked);
}

}  // namespace shardproof::compact
