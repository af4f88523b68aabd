#include "engine/stage/defined_cut.h"

#include <algorithm>
#include <optional>

#include "engine/ops/op_registry.h"

namespace shardproof {
namespace {

// Whether `o` maps each position to the same position and nothing else:
// its operands and its one output share a shape, and the axis relations
// say only "same" (no combine, freeze or position use), and every output
// axis longer than 1 is "same" as an operand axis (not a broadcast).
class OnlySame : public AxisRelations {
 public:
  explicit OnlySame(int out_slot) : out_slot_(out_slot) {}
  void same(AxisRef a, AxisRef b) override {
    for (AxisRef r : {a, b})
      if (r.slot == out_slot_) related_out.insert(r.dim);
  }
  void sub_range(AxisRef, AxisRef, int64_t) override { other = true; }
  void product(AxisRef, const std::vector<AxisRef>&) override { other = true; }
  void freeze(AxisRef) override { other = true; }
  void combine(AxisRef) override { other = true; }
  void positions_on(int, AxisRef) override { other = true; }
  void same_positions(int, int) override {}  // values moved, as a transpose moves them
  void shifted_positions(int, int, int, int) override { other = true; }
  void compared_positions(int, int, bool) override { other = true; }
  bool other = false;
  std::set<int> related_out;  // output dims some operand axis is the same as

 private:
  int out_slot_;
};

bool positionwise(const Graph& log, const Op& o) {
  const OpDef* def = OpRegistry::instance().find(o.op);
  if (!def || def->collective() || o.out.size() != 1) return false;
  const Shape& shape = log.tensors[static_cast<size_t>(o.out[0])].shape;
  std::vector<TensorInfo> in, out = {{shape, log.tensors[static_cast<size_t>(o.out[0])].dtype}};
  // The same shape, or its axes permuted (a transpose: each axis "same" as one operand axis).
  std::vector<int64_t> sorted_out(shape.begin(), shape.end());
  std::sort(sorted_out.begin(), sorted_out.end());
  for (int t : o.in) {
    const TensorDecl& d = log.tensors[static_cast<size_t>(t)];
    std::vector<int64_t> sorted_in(d.shape.begin(), d.shape.end());
    std::sort(sorted_in.begin(), sorted_in.end());
    if (sorted_in != sorted_out) return false;
    in.push_back({d.shape, d.dtype});
  }
  OnlySame rel(static_cast<int>(in.size()));
  def->relate_axes(o.attrs, in, out, rel);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1 && !rel.related_out.count(static_cast<int>(d))) return false;
  return !rel.other;
}

// The tensors a walk back from `t` writes, or nullopt when it reaches a
// logical input outside `held` or needs more than kMaxDefiningOps ops.
std::optional<std::set<int>> defining_walk(const Graph& log, int t, const std::set<int>& held,
                                           bool only_positionwise) {
  std::set<int> ops, written;
  std::vector<int> work = {t};
  while (!work.empty()) {
    const int u = work.back();
    work.pop_back();
    // `t` itself may be held (read by the cone): its walk starts anyway.
    if ((u != t && held.count(u)) || written.count(u)) continue;
    const int op = log.producer[static_cast<size_t>(u)];
    if (op < 0) return std::nullopt;  // a free value the logical side never reads
    if (!ops.insert(op).second) continue;
    if (static_cast<int>(ops.size()) > kMaxDefiningOps) return std::nullopt;
    const Op& o = log.ops[static_cast<size_t>(op)];
    if (only_positionwise && !positionwise(log, o)) return std::nullopt;
    written.insert(o.out.begin(), o.out.end());
    for (int in : o.in) work.push_back(in);
  }
  return written;
}

}  // namespace

std::vector<int> defined_cut_tensors(const Graph& log, const std::vector<int>& cut,
                                     std::set<int> held) {
  std::vector<int> defined;
  std::vector<char> done(cut.size(), 0), read(cut.size(), 0);
  for (size_t i = 0; i < cut.size(); ++i) read[i] = held.count(cut[i]) > 0;
  // A walk may end at another cut tensor: the stage holds it (free, or defined
  // in turn). The claim-inferred twin `mm` beside the cut gradient
  // `t(t(mm))` that the cone reads: free, both let the parallel side read `mm`
  // where the logical side reads an unrelated gradient.
  held.insert(cut.begin(), cut.end());
  // A tensor defined may hold what another's walk ends at: to a fixpoint.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < cut.size(); ++i) {
      if (done[i]) continue;
      // A tensor the stage reads is defined only position by position: a
      // reduction or contraction would tie whole lines together and keep
      // them from shrinking (the stage would grow past what a solver takes).
      std::optional<std::set<int>> written = defining_walk(log, cut[i], held, read[i] != 0);
      if (!written) continue;
      done[i] = 1, changed = true;
      defined.push_back(cut[i]);
      held.insert(written->begin(), written->end());
    }
  }
  return defined;
}

}  // namespace shardproof
