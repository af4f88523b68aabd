#include "engine/stage/stage.h"

#include "engine/core/contraction.h"
#include "engine/core/parallel_for.h"
#include "engine/stage/demanded_region.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
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

// How logical tensor `t`'s producer contracts (checked by the parser for
// every restricted claim).
Contraction contraction_producing(const Graph& log, int t) {
  const Op& op = log.ops[log.producer[t]];
  std::vector<Shape> shapes;
  for (int in : op.in) shapes.push_back(log.tensors[in].shape);
  Contraction c;
  if (std::string e = contraction_of(op.op, op.attrs, shapes, c); !e.empty())
    throw std::logic_error("restricted claim on " + log.tensors[t].name + ": " + e);
  return c;
}

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
    if (d.of)
      stage_.tensors[index].logical_index = d.of->over.empty()
                                                ? add_logical(d.of->logical)
                                                : add_restricted(d.of->logical, d.of->over);
    return index;
  }

  // Logical tensor `t` as its producer computes it with the contraction
  // limited to `over`: the operands sliced to a block along the contracted
  // dims, then the producer itself; for strided sets (several blocks), one
  // such partial per combination of blocks, added up. (Not a concat of the
  // blocks: it would relate one line to another at several offsets, which
  // reduction cannot keep.) Its operands are stage tensors like any other.
  int add_restricted(int t, const OverSpec& over) {
    auto it = restricted_map_.find({t, over});
    if (it != restricted_map_.end()) return it->second;
    const Graph& log = plan_.logical;
    const int producer = log.producer[t];
    const Op& op = log.ops[producer];
    const Contraction c = contraction_producing(log, t);
    std::vector<int> whole;
    for (int in : op.in) whole.push_back(add_logical(in));
    int64_t combinations = 1;
    for (const OverRange& r : over) combinations *= r.count;
    const std::string restricted = " over " + over_to_string(over);
    int sum = -1;
    for (int64_t combination = 0; combination < combinations; ++combination) {
      std::vector<int> operands = whole;
      int64_t rest = combination;
      for (size_t a = 0; a < c.axes.size(); ++a) {
        const std::pair<int64_t, int64_t> block = over[a].block(rest % over[a].count);
        rest /= over[a].count;
        for (auto [k, dim] : c.axes[a]) operands[k] = add_slice(operands[k], dim, block);
      }
      const std::string suffix = combinations == 1
                                     ? restricted
                                     : restricted + " (block " + std::to_string(combination) + ")";
      const int partial = add_logical_op(producer, op.op, op.attrs, operands, t, suffix);
      sum = sum < 0
                ? partial
                : add_logical_op(producer, "add", {}, {sum, partial}, t,
                                 restricted + " (blocks 0.." + std::to_string(combination) + ")");
    }
    return restricted_map_[{t, over}] = sum;
  }

  // A stage op of the logical side, writing a new tensor shaped like
  // logical tensor `t`, named after it with `suffix`.
  int add_logical_op(int producer, const std::string& kind, const AttrMap& attrs,
                     std::vector<int> in, int t, const std::string& suffix) {
    const TensorDecl& d = plan_.logical.tensors[t];
    StageTensor st;
    st.name = d.name + suffix;
    st.source = t;
    st.shape = st.full_shape = d.shape;
    st.dtype = d.dtype;
    stage_.tensors.push_back(st);
    const int index = static_cast<int>(stage_.tensors.size()) - 1;
    StageOp so;
    so.op = kind;
    so.attrs = attrs;
    so.in = std::move(in);
    so.out = {index};
    so.source = producer;
    so.display_name = plan_.logical.ops[producer].display_name() + suffix;
    stage_.ops.push_back(std::move(so));
    return index;
  }

  // Parallel tensors the stage reads or claims: an all_to_all or a
  // reduce_scatter writes only these of its outputs, an all_reduce or an
  // all_gather writes them first.
  void set_needed(std::set<int> needed) { needed_ = std::move(needed); }

  void add_op(const Graph& g, int op_index, bool parallel) {
    const Op& op = g.ops[op_index];
    if (parallel && op.op == "all_to_all") return add_all_to_all(op, op_index);
    if (parallel && op.op == "reduce_scatter") return add_reduce_scatter(op, op_index);
    StageOp so;
    so.op = op.op;
    so.attrs = op.attrs;
    so.group = op.group;
    so.parallel = parallel;
    so.source = op_index;
    so.display_name = op.display_name();
    for (int t : op.in) so.in.push_back(parallel ? add_parallel(t) : add_logical(t));
    for (int t : outputs_in_stage_order(op, parallel)) {
      int index = parallel ? add_parallel(t) : add_logical(t);
      stage_.tensors[index].free = false;
      so.out.push_back(index);
    }
    stage_.ops.push_back(std::move(so));
  }

  // An op's outputs as the stage writes them. Every output of an all_reduce
  // or an all_gather is the same value, so the ones the stage reads or
  // claims go first (in group order): a stage that needs one member's output
  // (such as a ZeRO rank slicing its shard from it) then keys the same
  // whichever member that is, and the corners along the group's axis stay
  // in one class.
  std::vector<int> outputs_in_stage_order(const Op& op, bool parallel) const {
    if (!parallel || (op.op != "all_reduce" && op.op != "all_gather")) return op.out;
    std::vector<int> out = op.out;
    std::stable_partition(out.begin(), out.end(), [&](int t) { return needed_.count(t) > 0; });
    return out;
  }

 private:
  // Stage tensor `tensor` cut to [range) along `dim` by a slice op.
  int add_slice(int tensor, int dim, std::pair<int64_t, int64_t> range) {
    StageTensor st = stage_.tensors[tensor];
    st.name += "[" + std::to_string(dim) + ": " + std::to_string(range.first) + ":" +
               std::to_string(range.second) + "]";
    st.free = false;
    st.logical_input = false;
    st.shape[dim] = st.full_shape[dim] = range.second - range.first;
    stage_.tensors.push_back(st);
    const int index = static_cast<int>(stage_.tensors.size()) - 1;
    StageOp so;
    so.op = "slice";
    so.attrs = {{"dim", Attr::of_int(dim)},
                {"start", Attr::of_int(range.first)},
                {"end", Attr::of_int(range.second)}};
    so.in = {tensor};
    so.out = {index};
    so.display_name = "slice " + box_to_string({range}) + " of " + stage_.tensors[tensor].name;
    stage_.ops.push_back(std::move(so));
    return index;
  }

  // Piece `j` of `in.size()` along `dim` of each of `in`: intermediates of
  // the collective `op_index` (not claims of its inputs), for its
  // written-out forms.
  std::vector<int> pieces(int op_index, const std::vector<int>& in, int dim, size_t j,
                          const std::string& display_name) {
    const int64_t len = stage_.tensors[in[0]].full_shape[dim] / static_cast<int64_t>(in.size());
    const std::pair<int64_t, int64_t> piece{static_cast<int64_t>(j) * len,
                                            static_cast<int64_t>(j + 1) * len};
    std::vector<int> out;
    for (int t : in) {
      const int sliced = add_slice(t, dim, piece);
      stage_.tensors[sliced].of.reset();
      stage_.tensors[sliced].logical_index = -1;
      stage_.ops.back().parallel = true;
      stage_.ops.back().source = op_index;
      stage_.ops.back().display_name = display_name;
      out.push_back(sliced);
    }
    return out;
  }

  int dim_of(const Op& op, const char* key) const {
    const int64_t rank = static_cast<int64_t>(plan_.parallel.tensors[op.in[0]].shape.size());
    const int64_t d = op.attrs.at(key).as_int();
    return static_cast<int>(d < 0 ? d + rank : d);
  }

  // A collective written out for the outputs the stage needs, each from its
  // own pieces of the inputs: a stage that needs one member's output then
  // holds that member's pieces, slices that reduce like any other, instead
  // of every output with the split dim kept at full size (and the member's
  // place in the group, a full position, in the stage's key: corners along
  // the group's axis would key differently and split their class).
  //
  // all_to_all: output j is the concat along concat_dim of every input's
  // j-th piece along split_dim (its definition, ops/collectives.cpp).
  void add_all_to_all(const Op& op, int op_index) {
    std::vector<int> in;
    for (int t : op.in) in.push_back(add_parallel(t));
    const int split = dim_of(op, "split_dim"), concat = dim_of(op, "concat_dim");
    for (size_t j = 0; j < op.out.size(); ++j) {
      if (!needed_.count(op.out[j])) continue;
      StageOp so = written_out(op, op_index, j, "concat", in, split);
      so.attrs = {{"dim", Attr::of_int(concat)}};
      stage_.ops.push_back(std::move(so));
    }
  }

  // reduce_scatter: output j is the reduction (its `reduce`, in group
  // order) of every input's j-th piece along dim: an all_reduce of the
  // pieces, whose other outputs (equal to it) nothing reads.
  void add_reduce_scatter(const Op& op, int op_index) {
    std::vector<int> in;
    for (int t : op.in) in.push_back(add_parallel(t));
    const int dim = dim_of(op, "dim");
    for (size_t j = 0; j < op.out.size(); ++j) {
      if (!needed_.count(op.out[j])) continue;
      StageOp so = written_out(op, op_index, j, "all_reduce", in, dim);
      if (auto r = op.attrs.find("reduce"); r != op.attrs.end()) so.attrs["reduce"] = r->second;
      so.group = op.group;
      for (size_t k = 1; k < in.size(); ++k) {
        StageTensor copy = stage_.tensors[so.out[0]];
        copy.name += " (copy " + std::to_string(k) + ")";
        copy.of.reset();
        copy.logical_index = -1;
        stage_.tensors.push_back(std::move(copy));
        so.out.push_back(static_cast<int>(stage_.tensors.size()) - 1);
      }
      stage_.ops.push_back(std::move(so));
    }
  }

  // The op `kind` that writes output j of the collective `op` from the j-th
  // pieces of its inputs `in` along `dim` (attributes left to the caller).
  StageOp written_out(const Op& op, int op_index, size_t j, const char* kind,
                      const std::vector<int>& in, int dim) {
    StageOp so;
    so.op = kind;
    so.parallel = true;
    so.source = op_index;
    so.display_name = op.display_name() + " (output " + std::to_string(j) + ")";
    so.in = pieces(op_index, in, dim, j, so.display_name);
    const int out = add_parallel(op.out[j]);
    stage_.tensors[out].free = false;
    so.out = {out};
    return so;
  }

  const Plan& plan_;
  Stage& stage_;
  std::set<int> needed_;
  std::map<int, int> logical_map_, parallel_map_;
  std::map<std::pair<int, OverSpec>, int> restricted_map_;
};

}  // namespace

// The cones of a stage: its parallel cone (stopping at lineage tensors
// outside the group) and the logical ops up to the cut that the claimed
// region demands.
void cut_cones(const Plan& plan, StageUnit& unit) {
  const Graph& par = plan.parallel;
  const Graph& log = plan.logical;
  const std::set<int> member_set(unit.members.begin(), unit.members.end());

  std::set<int> par_reached;
  unit.parallel_cone = backward_cone(
      par, unit.members,
      [&](int t) { return par.tensors[t].of.has_value() && !member_set.count(t); }, par_reached);

  // The cut: logical tensors the parallel stage inputs refer to. A
  // restricted input refers to its contraction's operands instead: the stage
  // computes it from them, taken as free (a stronger statement, as for any
  // cut), unless an operand is the target itself.
  std::set<int> cut, operands, restricted;
  const std::set<int> par_op_set(unit.parallel_cone.begin(), unit.parallel_cone.end());
  for (int t : par_reached) {
    bool produced_inside = par.producer[t] >= 0 && par_op_set.count(par.producer[t]) > 0;
    if (produced_inside || !par.tensors[t].of) continue;
    const Lineage& of = *par.tensors[t].of;
    if (of.over.empty()) {
      cut.insert(of.logical);
      continue;
    }
    restricted.insert(log.producer[of.logical]);
    for (int in : log.ops[log.producer[of.logical]].in) operands.insert(in);
  }
  std::function<bool(int)> stop = [&](int t) {
    return cut.count(t) > 0 || (operands.count(t) && t != unit.logical);
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
}

namespace {

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
      if (d.of->logical == target && d.of->over.empty()) return true;
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

std::string stage_title(const Plan& plan, const StageUnit& unit) {
  std::string title = slice_to_string(plan.logical.tensors[unit.logical].name, unit.slice);
  if (unit.parts) title += " (" + std::to_string(unit.parts) + " parts)";
  if (!unit.over.empty()) title += " over " + over_to_string(unit.over);
  if (unit.scale != std::pair<int64_t, int64_t>{1, 1})
    title += " scaled by " + rational_to_string(Rational(unit.scale.first) / unit.scale.second);
  return title;
}

Stage build_stage(const Plan& plan, const StageUnit& unit, int id) {
  const Graph& par = plan.parallel;
  const Graph& log = plan.logical;
  Stage stage;
  stage.id = id;
  StageBuilder builder(plan, stage);
  if (unit.over.empty()) stage.target = builder.add_logical(unit.logical);
  for (int op : unit.logical_cone) builder.add_op(log, op, false);
  // After the cone: the restricted target's operands are its outputs.
  if (!unit.over.empty()) stage.target = builder.add_restricted(unit.logical, unit.over);
  std::set<int> needed(unit.members.begin(), unit.members.end());
  for (int op : unit.parallel_cone) needed.insert(par.ops[op].in.begin(), par.ops[op].in.end());
  builder.set_needed(std::move(needed));
  for (int op : unit.parallel_cone) builder.add_op(par, op, true);
  for (int m : unit.members) stage.members.push_back(builder.add_parallel(m));
  // Restricted inputs added logical ops among the parallel ones.
  std::stable_partition(stage.ops.begin(), stage.ops.end(),
                        [](const StageOp& op) { return !op.parallel; });
  stage.slice = unit.slice;
  stage.parts = unit.parts;
  stage.scale = unit.scale;
  stage.title = stage_title(plan, unit);
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
