// The cut (stage.h): a plan's claim groups and the cones of their stages.
#include "engine/stage/stage.h"

#include "engine/core/contraction.h"
#include "engine/core/parallel_for.h"
#include "engine/stage/claim_cone.h"
#include "engine/stage/defined_cut.h"
#include "engine/stage/demanded_region.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace shardproof {
namespace {

struct GroupKey {
  int logical;
  SliceSpec slice;
  int64_t parts;
  OverSpec over;
  std::pair<int64_t, int64_t> scale;  // a scaled claim's factor (1/1: none)
  bool operator<(const GroupKey& o) const {
    return std::tie(logical, slice, parts, over, scale) <
           std::tie(o.logical, o.slice, o.parts, o.over, o.scale);
  }
};

// An expanded plan's parallel graph as claim_cone.h walks it, keeping what
// the walk reaches.
class GraphCone {
 public:
  using Tensor = int;
  using Op = int;
  class Operands {
   public:
    explicit Operands(const std::vector<int>& in) : in_(&in) {}
    std::optional<int> next() {
      if (next_ == in_->size()) return std::nullopt;
      return (*in_)[next_++];
    }

   private:
    const std::vector<int>* in_;
    size_t next_ = 0;
  };

  // `members`: the claim group walked (it outlives the view).
  GraphCone(const Graph& g, const std::set<int>& members) : g_(g), members_(members) {}

  bool input(int t) const { return g_.producer[t] < 0; }
  bool claimed(int t) const { return g_.tensors[t].of.has_value(); }
  bool member(int t) const { return members_.count(t) > 0; }
  void reach(int t) { reached_.insert(t); }
  bool stage_input(int) { return true; }
  bool enter_tensor(int t, bool) { return seen_.insert(t).second; }
  int producer(int t) const { return g_.producer[t]; }
  bool enter_op(int op) { return ops_.insert(op).second; }
  Operands operands(int op) {
    // A multi-output op computes all of its outputs.
    for (int out : g_.ops[op].out) reached_.insert(out), seen_.insert(out);
    return Operands(g_.ops[op].in);
  }
  void leave_op(int) {}
  void leave_tensor(int, bool) {}

  const std::set<int>& reached() const { return reached_; }
  // The ops reached, producers first.
  std::vector<int> ops() const {
    // Sorted by topological rank: scanning the whole graph's order here would
    // make cutting a plan quadratic (a stage per claim, every op per stage).
    std::vector<int> ordered(ops_.begin(), ops_.end());
    std::sort(ordered.begin(), ordered.end(),
              [&](int a, int b) { return g_.topo_rank[a] < g_.topo_rank[b]; });
    return ordered;
  }

 protected:
  const Graph& g_;

 private:
  const std::set<int>& members_;
  std::set<int> reached_, seen_, ops_;
};

// Cut tensors whose producers are at hand are computed in the stage
// (defined_cut.h): those `cone` (from `seeds`) never reads, and those it
// reads beside what they are computed from (abs = maximum(x, neg x) with
// neg x cut). They join `defined` and the seeds, each demanded as the hull
// of its claimed slices, and the cone is walked again.
void define_cut_by_producers(const Graph& log, const std::set<int>& cut,
                             const std::map<int, SliceSpec>& claimed,
                             std::vector<std::pair<int, SliceSpec>> seeds, std::set<int>& defined,
                             std::vector<int>& cone, const std::function<bool(int)>& stop) {
  std::set<int> held;
  for (const auto& seed : seeds) held.insert(seed.first);
  for (int op : cone) {
    held.insert(log.ops[op].in.begin(), log.ops[op].in.end());
    held.insert(log.ops[op].out.begin(), log.ops[op].out.end());
  }
  // Unread ones first: their walks may end at each other, never at a read one.
  std::vector<int> candidates;
  for (int t : cut)
    if (!held.count(t)) candidates.push_back(t);
  for (int t : cut)
    if (held.count(t)) candidates.push_back(t);
  if (candidates.empty()) return;
  for (int t : defined_cut_tensors(log, candidates, held)) {
    defined.insert(t);
    seeds.push_back({t, claimed.at(t)});
  }
  if (!defined.empty()) cone = demanded_cone(log, seeds, stop);
}

}  // namespace

// The cones of a stage: its parallel cone (stopping at lineage tensors
// outside the group) and the logical ops up to the cut that the claimed
// region demands.
void cut_cones(const Plan& plan, StageUnit& unit) {
  const Graph& par = plan.parallel;
  const Graph& log = plan.logical;
  const std::set<int> member_set(unit.members.begin(), unit.members.end());
  GraphCone cone(par, member_set);
  walk_claim_cone(cone, unit.members);
  unit.parallel_cone = cone.ops();
  const std::set<int>& par_reached = cone.reached();

  // The cut: logical tensors the parallel stage inputs refer to. A
  // restricted input refers to its contraction's operands instead: the stage
  // computes it from them, taken as free (a stronger statement, as for any
  // cut), unless an operand is the target itself.
  std::set<int> cut, operands, restricted;
  std::map<int, SliceSpec> claimed;  // per cut tensor, the hull of the slices claimed
  const std::set<int> par_op_set(unit.parallel_cone.begin(), unit.parallel_cone.end());
  for (int t : par_reached) {
    bool produced_inside = par.producer[t] >= 0 && par_op_set.count(par.producer[t]) > 0;
    if (produced_inside || !par.tensors[t].of) continue;
    const Lineage& of = *par.tensors[t].of;
    if (of.over.empty()) {
      cut.insert(of.logical);
      auto [it, fresh] = claimed.emplace(of.logical, of.slice);
      for (size_t d = 0; !fresh && d < of.slice.size(); ++d)
        it->second[d] = {std::min(it->second[d].first, of.slice[d].first),
                         std::max(it->second[d].second, of.slice[d].second)};
      continue;
    }
    restricted.insert(log.producer[of.logical]);
    for (int in : log.ops[log.producer[of.logical]].in) operands.insert(in);
  }
  std::set<int> defined;  // cut tensors the stage computes (defined_cut.h)
  std::function<bool(int)> stop = [&](int t) {
    return (cut.count(t) > 0 && !defined.count(t)) || (operands.count(t) && t != unit.logical);
  };
  // A restricted group's target is its producer over a box: the cone starts
  // at the producer's operands, each demanded as the slice demands it, cut
  // to the box along the contracted dims.
  std::vector<std::pair<int, SliceSpec>> seeds;
  if (unit.over.empty()) {
    seeds.push_back({unit.logical, unit.slice});
  } else {
    const int producer = log.producer[unit.logical];
    restricted.insert(producer);
    const Contraction c = contraction_producing(log, unit.logical);
    for (size_t k = 0; k < log.ops[producer].in.size(); ++k) {
      const int in = log.ops[producer].in[k];
      if (stop(in)) continue;
      SliceSpec region = operand_demand(log, producer, k, unit.slice);
      for (size_t a = 0; a < c.axes.size(); ++a)
        for (auto [operand, dim] : c.axes[a])
          if (operand == static_cast<int>(k))  // the blocks' hull
            region[dim] = {unit.over[a].lo, unit.over[a].last_hi()};
      seeds.push_back({in, region});
    }
  }
  unit.restricted.assign(restricted.begin(), restricted.end());
  // When a parallel input claims the target itself (parts all-reduced into
  // a replica, a replica forwarded by send), the claim holds for every value
  // of the target, so the target is cut too and no logical op is needed.
  unit.logical_cone.clear();
  if ((unit.over.empty() && cut.count(unit.logical)) || seeds.empty()) return;
  // Only what the claimed region depends on; the rest are free leaves.
  unit.logical_cone = demanded_cone(log, seeds, stop);
  define_cut_by_producers(log, cut, claimed, seeds, defined, unit.logical_cone, stop);
}

namespace {

// Whether `member`'s claim cone (with the group `members`) reaches a claim
// on the target logical tensor itself, e.g. parts that an all-reduce sums
// into a replica.
class TargetClaimSearch : public GraphCone {
 public:
  TargetClaimSearch(const Graph& par, const std::set<int>& members, int target)
      : GraphCone(par, members), target_(target) {}
  bool stage_input(int t) {
    const Lineage& of = *g_.tensors[t].of;
    found_ = of.logical == target_ && of.over.empty();
    return !found_;  // found: the walk ends
  }
  bool found() const { return found_; }

 private:
  const int target_;
  bool found_ = false;
};

bool reaches_target_claim(const Graph& par, int member, const std::set<int>& members, int target) {
  TargetClaimSearch search(par, members, target);
  walk_claim_cone(search, {member});
  return search.found();
}

// A stage whose parallel inputs claim its target takes the target as free
// (cut_cones), which is right only for members computed from those claims.
// A group that mixes them with members computed another way (a replica
// recomputed from the inputs) becomes two stages, each checked on its own.
std::vector<std::vector<int>> split_members(const Graph& par, const GroupKey& key,
                                            const std::vector<int>& members) {
  if (members.size() < 2) return {members};
  const std::set<int> member_set(members.begin(), members.end());
  std::vector<int> from_claims, computed;
  for (int m : members)
    (reaches_target_claim(par, m, member_set, key.logical) ? from_claims : computed).push_back(m);
  if (from_claims.empty() || computed.empty()) return {members};
  return {from_claims, computed};
}

}  // namespace

std::vector<StageUnit> cut_units(const Plan& plan, int jobs) {
  const Graph& par = plan.parallel;
  std::map<GroupKey, std::vector<int>> groups;
  std::vector<GroupKey> order;  // first appearance in the parallel topological order
  std::set<int> inputs(par.inputs.begin(), par.inputs.end());
  auto consider = [&](int t) {
    const TensorDecl& d = par.tensors[t];
    if (!d.of || inputs.count(t)) return;  // input claims are assumptions
    GroupKey key{d.of->logical,
                 d.of->slice,
                 d.of->has_part ? d.of->part_n : 0,
                 d.of->over,
                 {d.of->scale_num, d.of->scale_den}};
    auto& members = groups[key];
    if (members.empty()) order.push_back(key);
    if (std::find(members.begin(), members.end(), t) == members.end()) members.push_back(t);
  };
  for (int op : par.topo_order)
    for (int t : par.ops[op].out) consider(t);

  std::vector<std::vector<std::vector<int>>> split(order.size());
  parallel_for(jobs, order.size(),
               [&](size_t i) { split[i] = split_members(par, order[i], groups.at(order[i])); });
  std::vector<StageUnit> units;
  for (size_t i = 0; i < order.size(); ++i)
    for (std::vector<int>& members : split[i])
      units.push_back({order[i].logical,
                       order[i].slice,
                       order[i].parts,
                       order[i].over,
                       order[i].scale,
                       std::move(members),
                       {},
                       {},
                       {}});
  parallel_for(jobs, units.size(), [&](size_t i) { cut_cones(plan, units[i]); });
  return units;
}

}  // namespace shardproof
