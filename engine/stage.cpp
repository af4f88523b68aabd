#include "engine/stage.h"

#include "engine/demanded_region.h"
#include "engine/parallel_for.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace shardproof {
namespace {

struct GroupKey {
  int logical;
  SliceSpec slice;
  int64_t parts;
  bool operator<(const GroupKey& o) const {
    return std::tie(logical, slice, parts) < std::tie(o.logical, o.slice, o.parts);
  }
};

// Collects ops (producers first) needed to compute `roots`, stopping at
// tensors for which `stop` holds (and at graph inputs).
template <class Stop>
std::vector<int> backward_cone(const Graph& g, const std::vector<int>& roots, Stop stop,
                               std::set<int>& reached_tensors) {
  std::set<int> ops;
  std::vector<int> work(roots.begin(), roots.end());
  std::set<int> seen;
  while (!work.empty()) {
    int t = work.back();
    work.pop_back();
    if (!seen.insert(t).second) continue;
    reached_tensors.insert(t);
    bool is_root = std::find(roots.begin(), roots.end(), t) != roots.end();
    if (!is_root && stop(t)) continue;
    int producer = g.producer[t];
    if (producer < 0) continue;
    if (!ops.insert(producer).second) continue;
    for (int in : g.ops[producer].in) work.push_back(in);
    // A multi-output op computes all of its outputs.
    for (int out : g.ops[producer].out) reached_tensors.insert(out), seen.insert(out);
  }
  // Sorted by topological rank: scanning the whole graph's order here would
  // make cutting a plan quadratic (a stage per claim, every op per stage).
  std::vector<int> ordered(ops.begin(), ops.end());
  std::sort(ordered.begin(), ordered.end(),
            [&](int a, int b) { return g.topo_rank[a] < g.topo_rank[b]; });
  return ordered;
}

class StageBuilder {
 public:
  StageBuilder(const Plan& plan, Stage& stage) : plan_(plan), stage_(stage) {}

  int add_logical(int t) {
    auto it = logical_map_.find(t);
    if (it != logical_map_.end()) return it->second;
    const TensorDecl& d = plan_.logical.tensors[t];
    StageTensor st;
    st.name = d.name;
    st.parallel = false;
    st.source = t;
    st.shape = st.full_shape = d.shape;
    st.dtype = d.dtype;
    st.logical_input = plan_.logical.producer[t] < 0;
    st.free = true;  // until an op of the stage produces it
    stage_.tensors.push_back(st);
    return logical_map_[t] = static_cast<int>(stage_.tensors.size()) - 1;
  }

  int add_parallel(int t) {
    auto it = parallel_map_.find(t);
    if (it != parallel_map_.end()) return it->second;
    const TensorDecl& d = plan_.parallel.tensors[t];
    StageTensor st;
    st.name = d.name;
    st.parallel = true;
    st.source = t;
    st.shape = st.full_shape = d.shape;
    st.dtype = d.dtype;
    st.free = true;
    st.of = d.of;
    stage_.tensors.push_back(st);
    int index = static_cast<int>(stage_.tensors.size()) - 1;
    parallel_map_[t] = index;
    if (d.of) stage_.tensors[index].logical_index = add_logical(d.of->logical);
    return index;
  }

  void add_op(const Graph& g, int op_index, bool parallel) {
    const Op& op = g.ops[op_index];
    StageOp so;
    so.op = op.op;
    so.attrs = op.attrs;
    so.group = op.group;
    so.parallel = parallel;
    so.source = op_index;
    so.display_name = op.display_name();
    for (int t : op.in) so.in.push_back(parallel ? add_parallel(t) : add_logical(t));
    for (int t : op.out) {
      int index = parallel ? add_parallel(t) : add_logical(t);
      stage_.tensors[index].free = false;
      so.out.push_back(index);
    }
    stage_.ops.push_back(std::move(so));
  }

 private:
  const Plan& plan_;
  Stage& stage_;
  std::map<int, int> logical_map_, parallel_map_;
};

// The structural part of a stage: its parallel cone (stopping at lineage
// tensors outside the group) and the logical cone up to the cut, before
// demand pruning reads any op's attributes.
void cut_cones(const Plan& plan, StageUnit& unit) {
  const Graph& par = plan.parallel;
  const Graph& log = plan.logical;
  const std::set<int> member_set(unit.members.begin(), unit.members.end());

  std::set<int> par_reached;
  unit.parallel_cone = backward_cone(
      par, unit.members,
      [&](int t) { return par.tensors[t].of.has_value() && !member_set.count(t); }, par_reached);

  // The cut: logical tensors the parallel stage inputs refer to.
  std::set<int> cut;
  const std::set<int> par_op_set(unit.parallel_cone.begin(), unit.parallel_cone.end());
  for (int t : par_reached) {
    bool produced_inside = par.producer[t] >= 0 && par_op_set.count(par.producer[t]) > 0;
    if (!produced_inside && par.tensors[t].of) cut.insert(par.tensors[t].of->logical);
  }
  // When a parallel input claims the target itself (parts all-reduced into
  // a replica, a replica forwarded by send), the claim holds for every value
  // of the target, so the target is cut too and no logical op is needed.
  unit.logical_cone.clear();
  if (!cut.count(unit.logical)) {
    std::set<int> log_reached;
    unit.logical_cone = backward_cone(
        log, {unit.logical}, [&](int t) { return cut.count(t) > 0; }, log_reached);
  }
}

// Whether `member`'s parallel cone (stopping, as a stage does, at lineage
// tensors outside the group) reaches a claim on the target logical tensor
// itself, e.g. parts that an all-reduce sums into a replica.
bool reaches_target_claim(const Graph& par, int member, const std::set<int>& member_set,
                          int target) {
  std::vector<int> work{member};
  std::set<int> seen;
  while (!work.empty()) {
    int t = work.back();
    work.pop_back();
    if (!seen.insert(t).second) continue;
    const TensorDecl& d = par.tensors[t];
    if (t != member && d.of && !member_set.count(t)) {
      if (d.of->logical == target) return true;
      continue;
    }
    int producer = par.producer[t];
    if (producer >= 0)
      for (int in : par.ops[producer].in) work.push_back(in);
  }
  return false;
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

int64_t Stage::element_count() const {
  int64_t n = 0;
  for (const StageTensor& t : tensors) n += shardproof::element_count(t.shape);
  return n;
}

std::string slice_to_string(const std::string& tensor, const SliceSpec& slice) {
  std::string s = tensor + "[";
  for (size_t i = 0; i < slice.size(); ++i)
    s += (i ? ", " : "") + std::to_string(slice[i].first) + ":" + std::to_string(slice[i].second);
  return s + "]";
}

std::vector<StageUnit> cut_units(const Plan& plan, int jobs) {
  const Graph& par = plan.parallel;
  std::map<GroupKey, std::vector<int>> groups;
  std::vector<GroupKey> order;  // first appearance in the parallel topological order
  std::set<int> inputs(par.inputs.begin(), par.inputs.end());
  auto consider = [&](int t) {
    const TensorDecl& d = par.tensors[t];
    if (!d.of || inputs.count(t)) return;  // input claims are assumptions
    GroupKey key{d.of->logical, d.of->slice, d.of->has_part ? d.of->part_n : 0};
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
      units.push_back(
          {order[i].logical, order[i].slice, order[i].parts, std::move(members), {}, {}});
  parallel_for(jobs, units.size(), [&](size_t i) { cut_cones(plan, units[i]); });
  return units;
}

Stage build_stage(const Plan& plan, const StageUnit& unit, int id) {
  const Graph& par = plan.parallel;
  const Graph& log = plan.logical;
  // Only what the claimed region depends on; the rest are free leaves.
  std::vector<int> log_ops = unit.logical_cone.empty()
                                 ? std::vector<int>{}
                                 : demanded_ops(log, unit.logical_cone, unit.logical, unit.slice);

  Stage stage;
  stage.id = id;
  StageBuilder builder(plan, stage);
  stage.target = builder.add_logical(unit.logical);
  for (int op : log_ops) builder.add_op(log, op, false);
  for (int op : unit.parallel_cone) builder.add_op(par, op, true);
  for (int m : unit.members) stage.members.push_back(builder.add_parallel(m));
  stage.slice = unit.slice;
  stage.parts = unit.parts;
  stage.title = slice_to_string(log.tensors[unit.logical].name, unit.slice);
  if (unit.parts) stage.title += " (" + std::to_string(unit.parts) + " parts)";
  stage.full_position.clear();  // identity until shape reduction fills it
  return stage;
}

std::vector<Stage> build_stages(const Plan& plan, int jobs) {
  return build_stages(plan, cut_units(plan, jobs), jobs);
}

std::vector<Stage> build_stages(const Plan& plan, const std::vector<StageUnit>& units, int jobs) {
  std::vector<Stage> stages(units.size());
  parallel_for(jobs, units.size(), [&](size_t i) {  // each stage reads the plan only
    stages[i] = build_stage(plan, units[i], static_cast<int>(i) + 1);
  });
  return stages;
}

}  // namespace shardproof
