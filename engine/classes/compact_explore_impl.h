// The explorer's state (compact_explore.h), shared by the files of its
// walk: compact_explore.cpp (names to templates, the walk, an anchor's
// exploration), compact_claim_groups.cpp (a claim's group, solved by
// search) and compact_rule_axes.cpp (the axes an op's own rules depend on).
// Internal to engine/classes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/classes/compact_explore.h"

namespace shardproof::compact {

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

Pattern pattern_of(const Template& t);

// The coordinates, axis by axis, at which a template's name can be
// evaluated (the mesh, narrowed by its single-axis conditions; for a send's
// out, at the receiver): a fact of the plan.
struct Domain {
  Coord lo{}, hi{};
};

struct Ref {
  uint32_t program, element, slot;
  const Pattern* pattern = nullptr;  // of the name it is indexed by
  Domain domain{};
};

struct Explorer::Impl {
  using Kind = OpTemplate::Kind;

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

  // The templates under a pattern's skeleton in `index` that no slot tells
  // apart from it: a fact of the plan, kept per pattern, so a lookup does
  // not scan every layer's templates. Claims are compared across
  // coordinates (a claim group's members), so only slots both write as
  // digits tell them apart ("l3" and "l7"); a name and a declaration or
  // producer are compared on one device, where slots alike but for their
  // constant never meet either ("l{8*pp + 3}" and "l{8*pp + 4}").
  using Index = std::unordered_map<std::string, std::vector<Ref>>;
  using Candidates = std::unordered_map<const Pattern*, std::vector<Ref>>;
  Candidates decl_candidates, producer_candidates, claim_candidates;
  enum class Compared { AcrossCoordinates, OnOneDevice };
  // `own`: the domain of the template `p` names (claims only), whose slots'
  // ranges there must meet the candidate's.
  const std::vector<Ref>& candidates(const Index& index, Candidates& memo, const Pattern& p,
                                     Compared compared = Compared::OnOneDevice,
                                     const Domain* own = nullptr) {
    auto [it, fresh] = memo.try_emplace(&p);
    if (fresh)
      if (auto found = index.find(p.skeleton); found != index.end())
        for (const Ref& r : found->second)
          if (compared == Compared::AcrossCoordinates
                  ? !written_apart(p, *r.pattern) && !(own && ranges_apart(p, *own, r))
                  : !apart_on_one_device(p, r))
            it->second.push_back(r);
    return it->second;
  }
  // The least and greatest value of `a` over `d`.
  static std::pair<int64_t, int64_t> range(const Affine& a, const Domain& d) {
    int64_t lo = a.constant, hi = a.constant;
    for (int axis = 0; axis < kAxisCount; ++axis) {
      const int64_t p = a.coef[axis] * d.lo[axis], q = a.coef[axis] * d.hi[axis];
      lo += std::min(p, q);
      hi += std::max(p, q);
    }
    return {lo, hi};
  }
  // Whether, in some slot, the values pattern `a` takes over its domain and
  // those r takes over its own never meet ("l3" on stage 0 and
  // "l{8*pp + 3}" on stages 1..13): a fact of the plan.
  // Or where a(c) = r(c') has no integer solution at all: the gcd of every
  // coefficient does not divide the difference of the constants
  // ("l{8*pp + 3}" and "l{8*pp + 4}").
  static bool ranges_apart(const Pattern& a, const Domain& own, const Ref& r) {
    for (size_t i = 0; i < a.slots.size() && i < r.pattern->slots.size(); ++i) {
      const Affine &x = a.slots[i], &y = r.pattern->slots[i];
      const auto [alo, ahi] = range(x, own);
      const auto [blo, bhi] = range(y, r.domain);
      if (ahi < blo || bhi < alo) return true;
      int64_t g = 0;
      for (int axis = 0; axis < kAxisCount; ++axis)
        g = std::gcd(g, std::gcd(std::abs(x.coef[axis]), std::abs(y.coef[axis])));
      if (g > 1 && (x.constant - y.constant) % g != 0) return true;
    }
    return false;
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
    if (!begin_node(key)) return;
    walk();
    end_node(key);
  }
  // The same in two halves, for a walk that is not one call (the claim
  // cone's): false, with the node's hash mixed in, if it was walked before;
  // else its record starts, apart from the one in progress, until end_node.
  bool begin_node(const NodeKey& key) {
    auto [it, fresh] = nodes.try_emplace(key, kInProgress);
    if (!fresh) {
      mix(it->second);
      return false;
    }
    outer.emplace_back(hash, count);
    hash = 0x6e6f6465ull ^ static_cast<uint64_t>(key.kind);
    return true;
  }
  void end_node(const NodeKey& key) {
    const uint64_t mine = hash;
    std::tie(hash, count) = outer.back();
    outer.pop_back();
    nodes[key] = mine;
    mix(mine);
  }
  std::vector<std::pair<uint64_t, int64_t>> outer;  // the records begin_node set aside

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

  explicit Impl(const CompactGraph& graph);

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
  // An equality needs the sign (an affine function nonzero at every corner
  // of a box may be zero between them); an inequality only its truth, a
  // half-space, convex on both sides: "pp - 1 >= 0" holds at pp = 1 and 2
  // alike although its sign differs, so the record does not split them.
  bool zero(int64_t v) { return sign(v) == 0; }
  bool nonneg(int64_t v) {
    const bool holds = v >= 0;
    mix(holds ? 0x6e6e31ull : 0x6e6e30ull);
    return holds;
  }
  void value(int64_t v) { mix(static_cast<uint64_t>(v) ^ 0xa5a5a5a5a5a5a5a5ull); }
  // A number of a logical name whose template is affine in pp with
  // coefficient k is recorded relative to the anchor's pipeline stage,
  // v - k * anchor_pp: corners at pp = lo and hi that agree then name
  // tensors k * (p - lo) further at every p between (a layer shift the class
  // verifier checks the logical graph for, docs/soundness.md, 2.2).
  void name_value(int64_t v, int64_t k) { value(v - k * anchor_pp); }

  bool holds(const Condition& cond, const Coord& c);
  bool in_mesh(const Coord& c, bool per_mb);

  // ---- keys ---------------------------------------------------------------
  int64_t pack(const Coord& c) const { return m.pack(c); }
  // An instance's node, as walked from anchors at pipeline stage
  // `anchor_pp`: a claim's record depends on the anchor's pp (below), so
  // anchors on different pipeline stages do not share nodes.
  int64_t anchor_pp = 0;
  int64_t node_id(const Coord& c) const { return pack(c) + anchor_pp * m.world * m.mb; }
  std::string where(const Coord& c, bool per_mb) const { return m.describe(c, per_mb); }

  // ---- matching a name to a template --------------------------------------
  // The coordinate at which `target` (its device part fixed by `dev`) gives
  // the hole values `v`, or nothing. The micro-batch is solved from a hole
  // with coefficient +-1 on mb, or from an equality of the domain. The
  // program's `on` (when it is about devices only) is tested first: a stage's program
  // whose names write its numbers as digits ("pp1.x2", on pp == 0) is
  // then told apart by its condition, the same at every anchor of a run of
  // pipeline stages, not by a slot equality such as pp - 1 == 1, which
  // holds at one of them only.
  template <class What>
  std::optional<Coord> solve(const Pattern& target, bool per_mb, const Condition& on,
                             const Condition& when, const std::vector<int64_t>& v, Coord dev,
                             What what) {
    dev[kMbAxis] = 0;
    const bool on_first = !(on.mask() & (AxisMask{1} << kMbAxis));  // else once mb is solved
    if (on_first && !holds(on, dev)) return std::nullopt;
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
    if (!in_mesh(dev, per_mb) || (!on_first && !holds(on, dev)) || !holds(when, dev))
      return std::nullopt;
    return dev;
  }

  // Whether two patterns differ in a slot both write as digits ("l3" and
  // "l7"): a fact of the plan, not of the anchor, so nothing is recorded.
  static bool written_apart(const Pattern& a, const Pattern& b) {
    for (size_t i = 0; i < a.slots.size() && i < b.slots.size(); ++i)
      if (a.written[i] && b.written[i] && a.slots[i].constant != b.slots[i].constant) return true;
    return false;
  }
  // Whether a name (pattern `a`) and the template `r` can never name one
  // tensor on one device: in some slot that neither numbers by the
  // micro-batch (solved, not shared), the difference of the two is an
  // affine function with no zero in r's domain ("l{8*pp + 3}" against
  // "l{8*pp + 4}" anywhere, "l3" against "l{8*pp + 3}" on pp 1..13). A fact
  // of the plan: nothing is recorded.
  static bool apart_on_one_device(const Pattern& a, const Ref& r) {
    const Pattern& b = *r.pattern;
    for (size_t i = 0; i < a.slots.size() && i < b.slots.size(); ++i) {
      const Affine &x = a.slots[i], &y = b.slots[i];
      if (x.coef[kMbAxis] != 0 || y.coef[kMbAxis] != 0) continue;
      // 128 bits: a difference of two coefficients (each up to 2^40) times
      // a coordinate, summed over the axes, can pass 2^63.
      __int128 lo = x.constant - y.constant, hi = lo;
      for (int axis = 0; axis < kMbAxis; ++axis) {
        const __int128 k = x.coef[axis] - y.coef[axis];
        const __int128 p = k * r.domain.lo[axis], q = k * r.domain.hi[axis];
        lo += std::min(p, q);
        hi += std::max(p, q);
      }
      if (lo > 0 || hi < 0) return true;
    }
    return false;
  }
  Domain domain_of(const Condition& on, const Condition& when, const Coord& shift) const;

  // The values of a pattern's slots at `c`; throws if it has no pattern.
  std::vector<int64_t> slots(const Template& t, const Coord& c);

  // The tensor instance that `ref`, evaluated at `at`, names on the device
  // `dev`.
  std::pair<Ref, Coord> declaration(const Template& ref, const Coord& at, const Coord& dev);

  // The op instance (template, instance coordinate) that writes tensor
  // instance (r, c), if any.
  std::optional<std::pair<Ref, Coord>> producer(const Ref& r, const Coord& c);

  // ---- the walk -----------------------------------------------------------
  // The walk is the claim cone's (engine/stage/claim_cone.h) over the
  // instances (InstanceCone, compact_explore.cpp).
  void record_claim(const TensorTemplate& t, const Coord& c);
  void reach_outputs(const OpTemplate& o, const Coord& mc);

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
  static std::optional<int64_t> pinned_by(const Condition& cond, int axis);

  void search(const Ref& u, const std::vector<Equation>& eqs, const std::vector<Axis>& axes,
              size_t depth, const Coord& seed, Coord c, std::vector<std::pair<Ref, Coord>>& out);

  // The claim group of the seed instance, searched once per instance; its
  // search's record is mixed into the walk in progress.
  const std::vector<std::pair<Ref, Coord>>& group_of(const Ref& seed, const Coord& c);

  // Whether two ranges can never be equal: their lengths are different
  // constants (a fact of the plan, not of the anchor, so nothing is
  // recorded; searching would record signs that vary with the anchor, such
  // as 32*dp' = 0 for a block of one dp rank against a whole dim).
  static bool lengths_apart(const std::pair<Affine, Affine>& a, const std::pair<Affine, Affine>& b);

  // Whether a restricted claim's axis is, at every coordinate, several
  // blocks with gaps between them (constant count above 1, constant gap).
  static bool gapped(const OverTemplate& o);

  // Whether claims `ul` and `lin` (same logical tensor) can never claim the
  // same region (facts of the plan: nothing is recorded); throws if they are
  // written in forms the search cannot compare.
  static bool claims_apart(const Lineage& ul, const Lineage& lin);
  // The axes to search claim template `u`'s instances along for `eqs`, in
  // the order they are fixed (a fact of the plan, the same at every anchor).
  std::vector<Axis> search_axes(const Ref& u, const std::vector<Equation>& eqs) const;
  std::vector<std::pair<Ref, Coord>> group(const Ref& seed, const Coord& c);

  // ---- the axes an op's own rules can depend on ---------------------------
  // A slot that is the device's own coordinate on one axis ("dp{dp}") names
  // the same tensor on every device along it; any other use of an axis (a
  // condition, an attribute, a send's offset, a slot such as mb-1, a
  // lineage slice of a tensor the op names, or a candidate declaration that
  // does not use the axis the same way) can make instances along it differ.
  static int self_axis(const Affine& a);
  static AxisMask lineage_mask(const TensorTemplate& t);
  AxisMask name_mask(const Template& ref);
  std::unordered_map<const OpTemplate*, AxisMask> rule_axes;
  AxisMask op_rule_axes(const Program& p, const OpTemplate& o);

  // Adds op instance (r, at) and the tensors it names to `into`, without
  // walking to producers: enough for the op's own rules.
  void shallow_op(const Ref& r, const Coord& at, Selection& into);

  AnchorRecord explore(const Coord& anchor, Selection& selection, Selection& checked);
};

}  // namespace shardproof::compact
