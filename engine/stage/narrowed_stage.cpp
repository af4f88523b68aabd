#include "engine/stage/narrowed_stage.h"
#include "engine/stage/boxes.h"

#include <map>
#include <stdexcept>

#include "engine/stage/narrowing_rules.h"

namespace shardproof {
namespace {

using Box = SliceSpec;

Box shifted(const Box& box, const SliceSpec& by, int sign) {
  Box out = box;
  for (size_t d = 0; d < out.size(); ++d) {
    out[d].first += sign * by[d].first;
    out[d].second += sign * by[d].first;
  }
  return out;
}

Box joined(Box a, const Box& b) {
  for (size_t d = 0; d < a.size(); ++d)
    a[d] = {std::min(a[d].first, b[d].first), std::max(a[d].second, b[d].second)};
  return a;
}

bool overlap(const Box& a, const Box& b) {
  for (size_t d = 0; d < a.size(); ++d)
    if (std::max(a[d].first, b[d].first) >= std::min(a[d].second, b[d].second)) return false;
  return true;
}

bool inside(const Box& in, const Box& box) {
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d].first < box[d].first || in[d].second > box[d].second) return false;
  return true;
}

// The boxes demanded of each tensor, walked back from the claimed elements in
// reverse evaluation order (stage_eval.h: logical ops, then the parallel
// inputs' claims, then parallel ops), so a tensor's boxes are complete before
// its producer or its claim is read. A computed tensor keeps their hull. A
// logical free tensor's elements are independent leaves, so it keeps its
// disjoint boxes apart (overlapping ones merge): a wrong offset reads two
// distant columns of one weight, whose hull would be most of the weight.
// A tensor computed by a one-output op or an all_reduce (`per_box`) keeps
// them apart too, its op written once per box, as long as the boxes the op
// computes stay disjoint (else their hull): parts claimed on the wrong group
// read a weight gradient at two distant columns through its matmul, and
// shards paired across ranks read two ranks' rows through their all_reduces
// and matmuls. So does a parallel input with a plain claim (one narrowed
// input per box, each reading its logical slice at its own offset).
class Demand {
 public:
  explicit Demand(const Stage& s)
      : s_(s), boxes_(s.tensors.size()), plans_(s.ops.size()), apart_(s.tensors.size(), false) {
    for (size_t t = 0; t < s.tensors.size(); ++t) {
      const StageTensor& st = s.tensors[t];
      // A plain claim's box reads its logical slice at an offset: one
      // narrowed input per box (parts share their leaves: one box).
      apart_[t] =
          leaves(static_cast<int>(t)) || (st.parallel && st.free && st.of && !st.of->has_part);
    }
    std::vector<int> producers(s.tensors.size(), 0);
    for (const StageOp& op : s.ops)
      for (int t : op.out) producers[t] += per_box(op) ? 1 : 2;
    for (size_t t = 0; t < s.tensors.size(); ++t)
      if (producers[t] == 1 && static_cast<int>(t) != s.target) apart_[t] = true;
    // A computed tensor that a parallel tensor's claim names by a single index
    // (not a free input's box) must stay one box.
    for (const StageTensor& st : s.tensors)
      if (st.logical_index >= 0 && !(st.parallel && st.free && st.of) && !leaves(st.logical_index))
        apart_[st.logical_index] = false;
  }

  void add(int t, Box box) {
    if (empty_box(box)) return;
    std::vector<Box>& b = boxes_[t];
    if (!apart_[t]) {
      b = {b.empty() ? box : joined(b[0], box)};
      return;
    }
    merge_apart(b, std::move(box));
  }

  // Adds `box` to disjoint boxes `b`, merging those it overlaps.
  static void merge_apart(std::vector<Box>& b, Box box) {
    for (size_t p = 0; p < b.size();) {
      if (!overlap(b[p], box)) {
        ++p;
        continue;
      }
      box = joined(b[p], box);
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(p));
      p = 0;
    }
    b.push_back(box);
  }

  void walk() {
    for (size_t i = s_.ops.size(); i-- > 0;)
      if (s_.ops[i].parallel) plan(i);
    claims();
    for (size_t i = s_.ops.size(); i-- > 0;)
      if (!s_.ops[i].parallel) plan(i);
  }

  // Every box of `t` (a computed tensor has at most one).
  const std::vector<Box>& boxes(int t) const { return boxes_[t]; }
  // The box of `t` that holds `part` (one always does once it was added).
  size_t box_holding(int t, const Box& part) const {
    for (size_t p = 0; p < boxes_[t].size(); ++p)
      if (inside(part, boxes_[t][p])) return p;
    throw std::logic_error("narrowed stage: a demanded box of a tensor was lost");
  }
  const std::vector<NarrowedOp>& op_plans(size_t i) const { return plans_[i]; }

 private:
  bool leaves(int t) const { return !s_.tensors[t].parallel && s_.tensors[t].free; }
  // An op that can be written once per disjoint box of its outputs: one
  // output, or an all_reduce (every output is the one reduction of all
  // operands, position by position).
  static bool per_box(const StageOp& op) { return op.out.size() == 1 || op.op == "all_reduce"; }
  const Box* hull(int t) const { return boxes_[t].empty() ? nullptr : &boxes_[t][0]; }

  void plan(size_t i) {
    const StageOp& op = s_.ops[i];
    std::vector<TensorInfo> in, out;
    for (int t : op.in) in.push_back({s_.tensors[t].shape, s_.tensors[t].dtype});
    for (int t : op.out) out.push_back({s_.tensors[t].shape, s_.tensors[t].dtype});
    // One plan per disjoint box of its outputs, if what they compute stays
    // disjoint.
    std::vector<Box> apart;
    if (per_box(op))
      for (int t : op.out)
        for (const Box& b : boxes_[t]) merge_apart(apart, b);
    if (apart.size() > 1) {
      std::vector<NarrowedOp> each;
      for (const Box& b : apart) each.push_back(narrow_op(op.op, op.attrs, in, out, b));
      bool disjoint = true;
      for (size_t a = 0; a < each.size(); ++a)
        for (size_t b = a + 1; b < each.size(); ++b)
          for (size_t o = 0; o < op.out.size(); ++o)
            disjoint = disjoint && !overlap(each[a].out[o], each[b].out[o]);
      if (disjoint) {
        for (size_t o = 0; o < op.out.size(); ++o) {
          boxes_[op.out[o]].clear();
          for (const NarrowedOp& n : each) boxes_[op.out[o]].push_back(n.out[o]);
        }
        for (const NarrowedOp& n : each)
          for (size_t k = 0; k < op.in.size(); ++k) add(op.in[k], n.in[k]);
        plans_[i] = std::move(each);
        return;
      }
    }
    std::optional<Box> demand;
    for (int t : op.out)
      for (const Box& b : boxes_[t]) demand = demand ? joined(*demand, b) : b;
    if (!demand) return;  // nothing it computes is needed
    NarrowedOp n = narrow_op(op.op, op.attrs, in, out, *demand);
    // Every output is computed on its box, demanded or not.
    for (size_t o = 0; o < op.out.size(); ++o) boxes_[op.out[o]] = {n.out[o]};
    for (size_t k = 0; k < op.in.size(); ++k) add(op.in[k], n.in[k]);
    plans_[i] = {std::move(n)};
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
        if (const Box* h = hull(t)) add(first, *h);
      if (hull(first))
        for (int t : members) boxes_[t] = boxes_[first];
    }
    for (size_t t = 0; t < s_.tensors.size(); ++t) {
      const StageTensor& st = s_.tensors[t];
      if (st.parallel && st.free && st.of)
        for (const Box& b : boxes_[t]) add(st.logical_index, shifted(b, st.of->slice, +1));
    }
  }

  const Stage& s_;
  std::vector<std::vector<Box>> boxes_;
  std::vector<std::vector<NarrowedOp>> plans_;
  std::vector<bool> apart_;  // keeps disjoint boxes apart
};

// Writes the narrowed stage: a tensor per demanded box, each op on the boxes
// it needs, with slices inserted where an operand's box is wider than what
// the op reads.
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
    index_.assign(full_.tensors.size(), {});
    for (size_t t = 0; t < full_.tensors.size(); ++t)
      for (const Box& b : demand_.boxes(static_cast<int>(t))) {
        index_[t].push_back(static_cast<int>(n.tensors.size()));
        n.tensors.push_back(narrowed_tensor(full_.tensors[t], b));
        source.push_back(static_cast<int>(t));
        box.push_back(b);
      }
    for (size_t t = 0; t < full_.tensors.size(); ++t) {
      const StageTensor& st = full_.tensors[t];
      if (st.logical_index < 0) continue;
      for (size_t p = 0; p < index_[t].size(); ++p) {
        StageTensor& nt = n.tensors[index_[t][p]];
        nt.logical_index = first(st.logical_index);
        if (!st.free || !st.of) continue;
        // The claimed slice, relative to the logical tensor's box that holds it.
        const Box claimed = shifted(demand_.boxes(static_cast<int>(t))[p], st.of->slice, +1);
        nt.logical_index = at(st.logical_index, claimed);
        nt.of->slice = shifted(claimed, box_of(st.logical_index, claimed), -1);
      }
    }
    for (size_t i = 0; i < full_.ops.size(); ++i)
      for (const NarrowedOp& plan : demand_.op_plans(i)) write_op(full_.ops[i], plan);
    n.target = at(full_.target, target_box);
    n.slice = shifted(target_box, box_of(full_.target, target_box), -1);
    const Box member_box = shifted(target_box, full_.slice, -1);
    for (int m : full_.members) n.members.push_back(window(m, member_box, true));
    return std::move(n);
  }

 private:
  StageTensor narrowed_tensor(const StageTensor& st, const Box& box) const {
    StageTensor t = st;
    t.shape = t.full_shape = box_sizes(box);
    return t;
  }

  int first(int t) const { return index_[t].empty() ? -1 : index_[t][0]; }
  // The narrowed tensor of `t` whose box holds `part`, and that box.
  int at(int t, const Box& part) const { return index_[t][demand_.box_holding(t, part)]; }
  const Box& box_of(int t, const Box& part) const {
    return demand_.boxes(t)[demand_.box_holding(t, part)];
  }

  // Tensor `t` restricted to `box` (inside one of its boxes): a chain of slices.
  int window(int t, const Box& box, bool parallel) {
    const Box& hull = box_of(t, box);
    int cur = at(t, box);
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
      w.logical_index = w.logical_index >= 0 ? first(w.logical_index) : -1;
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
    for (size_t o = 0; o < n.out.size(); ++o) n.out[o] = at(n.out[o], plan.out[o]);
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
  std::vector<std::vector<int>> index_;  // per tensor: its narrowed tensors, one per box
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
    for (const Box& b : demand.boxes(static_cast<int>(t))) count += element_count(box_sizes(b));
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
  for (auto [lo, hi] : demand.boxes(full.target)[demand.box_holding(full.target, target)])
    out.origin.push_back(lo);
  return out;
}

}  // namespace shardproof
