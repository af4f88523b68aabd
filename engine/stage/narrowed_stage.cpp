#include "engine/stage/narrowed_stage.h"

#include <map>

#include "engine/stage/narrowing_rules.h"

namespace shardproof {
namespace {

using Box = SliceSpec;

bool empty_box(const Box& box) {
  for (auto [lo, hi] : box)
    if (lo >= hi) return true;
  return false;
}

Shape sizes(const Box& box) {
  Shape s;
  for (auto [lo, hi] : box) s.push_back(hi - lo);
  return s;
}

Box shifted(const Box& box, const SliceSpec& by, int sign) {
  Box out = box;
  for (size_t d = 0; d < out.size(); ++d) {
    out[d].first += sign * by[d].first;
    out[d].second += sign * by[d].first;
  }
  return out;
}

// The hull of every box demanded of each tensor, walked back from the
// claimed elements in reverse evaluation order (stage_eval.h: logical ops,
// then the parallel inputs' claims, then parallel ops), so a tensor's hull is
// complete before its producer or its claim is read.
class Demand {
 public:
  explicit Demand(const Stage& s) : s_(s), hull_(s.tensors.size()), plans_(s.ops.size()) {}

  void add(int t, const Box& box) {
    if (empty_box(box)) return;
    std::optional<Box>& h = hull_[t];
    if (!h) {
      h = box;
      return;
    }
    for (size_t d = 0; d < box.size(); ++d)
      (*h)[d] = {std::min((*h)[d].first, box[d].first), std::max((*h)[d].second, box[d].second)};
  }

  void walk() {
    for (size_t i = s_.ops.size(); i-- > 0;)
      if (s_.ops[i].parallel) plan(i);
    claims();
    for (size_t i = s_.ops.size(); i-- > 0;)
      if (!s_.ops[i].parallel) plan(i);
  }

  const std::optional<Box>& hull(int t) const { return hull_[t]; }
  const std::optional<NarrowedOp>& op_plan(size_t i) const { return plans_[i]; }

 private:
  void plan(size_t i) {
    const StageOp& op = s_.ops[i];
    std::optional<Box> demand;
    for (int t : op.out) {
      if (!hull_[t]) continue;
      if (!demand) {
        demand = *hull_[t];
        continue;
      }
      for (size_t d = 0; d < demand->size(); ++d)
        (*demand)[d] = {std::min((*demand)[d].first, (*hull_[t])[d].first),
                        std::max((*demand)[d].second, (*hull_[t])[d].second)};
    }
    if (!demand) return;  // nothing it computes is needed
    std::vector<TensorInfo> in, out;
    for (int t : op.in) in.push_back({s_.tensors[t].shape, s_.tensors[t].dtype});
    for (int t : op.out) out.push_back({s_.tensors[t].shape, s_.tensors[t].dtype});
    NarrowedOp n = narrow_op(op.op, op.attrs, in, out, *demand);
    // Every output is computed on its box, demanded or not.
    for (size_t o = 0; o < op.out.size(); ++o) hull_[op.out[o]] = n.out[o];
    for (size_t k = 0; k < op.in.size(); ++k) add(op.in[k], n.in[k]);
    plans_[i] = std::move(n);
  }

  // A parallel input holds its claim's logical slice (or a part of it): its
  // box reads the logical tensor at the slice's offset. The parts of one set
  // share their leaves position by position (stage_eval.h), so they share
  // one box.
  void claims() {
    std::map<std::tuple<int, SliceSpec, int64_t, int64_t, int64_t>, std::vector<int>> sets;
    for (size_t t = 0; t < s_.tensors.size(); ++t) {
      const StageTensor& st = s_.tensors[t];
      if (!st.parallel || !st.free || !st.of || !st.of->has_part) continue;
      sets[{st.logical_index, st.of->slice, st.of->part_n, st.of->scale_num, st.of->scale_den}]
          .push_back(static_cast<int>(t));
    }
    for (auto& [key, members] : sets) {
      const int first = members.front();
      for (int t : members)
        if (hull_[t]) add(first, *hull_[t]);
      if (hull_[first])
        for (int t : members) hull_[t] = hull_[first];
    }
    for (size_t t = 0; t < s_.tensors.size(); ++t) {
      const StageTensor& st = s_.tensors[t];
      if (st.parallel && st.free && st.of && hull_[t])
        add(st.logical_index, shifted(*hull_[t], st.of->slice, +1));
    }
  }

  const Stage& s_;
  std::vector<std::optional<Box>> hull_;
  std::vector<std::optional<NarrowedOp>> plans_;
};

// Writes the narrowed stage: each demanded tensor at its hull's sizes, each
// op on the boxes it needs, with slices inserted where an operand's hull is
// wider than what the op reads.
class Writer {
 public:
  Writer(const Stage& full, const Demand& demand) : full_(full), demand_(demand) {}

  std::vector<int> source;  // per narrowed tensor (NarrowedStage)
  std::vector<Box> box;

  Stage write(const Box& target_box) {
    Stage& n = out_;
    n.id = full_.id;
    n.title = full_.title;
    n.parts = full_.parts;
    n.scale = full_.scale;
    index_.assign(full_.tensors.size(), -1);
    for (size_t t = 0; t < full_.tensors.size(); ++t) {
      if (!demand_.hull(static_cast<int>(t))) continue;
      index_[t] = static_cast<int>(n.tensors.size());
      n.tensors.push_back(narrowed_tensor(full_.tensors[t], *demand_.hull(static_cast<int>(t))));
      source.push_back(static_cast<int>(t));
      box.push_back(*demand_.hull(static_cast<int>(t)));
    }
    for (size_t t = 0; t < full_.tensors.size(); ++t) {
      const StageTensor& st = full_.tensors[t];
      if (index_[t] < 0 || st.logical_index < 0) continue;
      StageTensor& nt = n.tensors[index_[t]];
      nt.logical_index = index_[st.logical_index];
      if (st.free && st.of)  // the claimed slice, relative to the logical tensor's box
        nt.of->slice = shifted(shifted(*demand_.hull(static_cast<int>(t)), st.of->slice, +1),
                               *demand_.hull(st.logical_index), -1);
    }
    for (size_t i = 0; i < full_.ops.size(); ++i)
      if (const std::optional<NarrowedOp>& plan = demand_.op_plan(i)) write_op(full_.ops[i], *plan);
    n.target = index_[full_.target];
    n.slice = shifted(target_box, *demand_.hull(full_.target), -1);
    const Box member_box = shifted(target_box, full_.slice, -1);
    for (int m : full_.members) n.members.push_back(window(m, member_box, true));
    return std::move(n);
  }

 private:
  StageTensor narrowed_tensor(const StageTensor& st, const Box& box) const {
    StageTensor t = st;
    t.shape = t.full_shape = sizes(box);
    return t;
  }

  // Tensor `t` restricted to `box` (inside its hull): a chain of slices.
  int window(int t, const Box& box, bool parallel) {
    const Box& hull = *demand_.hull(t);
    int cur = index_[t];
    if (box == hull) return cur;
    auto key = std::make_pair(t, box);
    if (auto it = windows_.find(key); it != windows_.end()) return it->second;
    Box now = hull;
    for (size_t d = 0; d < box.size(); ++d) {
      if (box[d] == hull[d]) continue;
      StageOp op;
      op.op = "slice";
      op.attrs = {{"dim", Attr::of_int(static_cast<int64_t>(d))},
                  {"start", Attr::of_int(box[d].first - hull[d].first)},
                  {"end", Attr::of_int(box[d].second - hull[d].first)}};
      op.parallel = parallel;
      op.display_name = "narrowed " + full_.tensors[t].name;
      now[d] = box[d];
      StageTensor w = narrowed_tensor(full_.tensors[t], now);
      source.push_back(t);
      this->box.push_back(now);
      w.free = false;
      w.logical_index = w.logical_index >= 0 ? index_[w.logical_index] : -1;
      op.in = {cur};
      cur = static_cast<int>(out_.tensors.size());
      op.out = {cur};
      out_.tensors.push_back(std::move(w));
      out_.ops.push_back(std::move(op));
    }
    windows_[key] = cur;
    return cur;
  }

  void write_op(const StageOp& op, const NarrowedOp& plan) {
    StageOp n = op;
    n.op = plan.op;
    n.attrs = plan.attrs;
    n.in.clear();
    for (size_t k = 0; k < op.in.size(); ++k)
      if (!empty_box(plan.in[k]) || plan.in[k].empty())
        n.in.push_back(window(op.in[k], plan.in[k], op.parallel));
    for (int& t : n.out) t = index_[t];
    if (!plan.per_output) {
      out_.ops.push_back(std::move(n));
      return;
    }
    for (int t : n.out) {
      StageOp one = n;
      one.out = {t};
      out_.ops.push_back(std::move(one));
    }
  }

  const Stage& full_;
  const Demand& demand_;
  Stage out_;
  std::vector<int> index_;
  std::map<std::pair<int, Box>, int> windows_;
};

}  // namespace

std::optional<NarrowedStage> narrow_stage(const Stage& full, const std::vector<int64_t>& element,
                                          int64_t max_elements, std::string& why) {
  if (element.size() != full.slice.size()) {
    why = "the element does not index the claimed tensor";
    return std::nullopt;
  }
  Box target;
  for (size_t d = 0; d < element.size(); ++d) {
    if (element[d] < full.slice[d].first || element[d] >= full.slice[d].second) {
      why = "the element lies outside the claimed slice";
      return std::nullopt;
    }
    target.push_back({element[d], element[d] + 1});
  }
  Demand demand(full);
  demand.add(full.target, target);
  for (int m : full.members) demand.add(m, shifted(target, full.slice, -1));
  demand.walk();
  int64_t count = 0;
  for (size_t t = 0; t < full.tensors.size(); ++t)
    if (const std::optional<Box>& h = demand.hull(static_cast<int>(t)))
      count += element_count(sizes(*h));
  if (count > max_elements) {
    why = "the elements it needs number " + std::to_string(count) + " (over " +
          std::to_string(max_elements) + ")";
    return std::nullopt;
  }
  NarrowedStage out;
  Writer writer(full, demand);
  out.stage = writer.write(target);
  out.source = std::move(writer.source);
  out.box = std::move(writer.box);
  for (auto [lo, hi] : *demand.hull(full.target)) out.origin.push_back(lo);
  return out;
}

}  // namespace shardproof
