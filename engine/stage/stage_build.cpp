// Building a stage (stage.h, build_stage): its own tensor and op tables,
// made from the plan and the unit the cut gave it.
#include "engine/core/contraction.h"
#include "engine/core/parallel_for.h"
#include "engine/stage/demanded_region.h"
#include "engine/stage/stage.h"

#include <algorithm>
#include <map>
#include <set>

namespace shardproof {
namespace {

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
