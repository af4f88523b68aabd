#include "engine/classes/batch_reuse.h"

#include <algorithm>
#include <unordered_map>

#include "engine/core/digest.h"
#include "engine/core/field_writer.h"

namespace shardproof {
namespace {

// Numbers things (logical tensors, ranks) by first appearance: two contents
// written with these numbers are equal only if one bijection maps the first
// plan's things onto the second's at every place they appear.
class FirstSeen {
 public:
  // The number of `x`; `fresh` says whether this is its first appearance.
  int64_t number(int64_t x, bool* fresh = nullptr) {
    auto [it, first] = numbers_.try_emplace(x, static_cast<int64_t>(numbers_.size()));
    if (fresh) *fresh = first;
    return it->second;
  }

 private:
  std::unordered_map<int64_t, int64_t> numbers_;
};

class RenamedContent {
 public:
  explicit RenamedContent(const Plan& sub)
      : sub_(sub), is_output_(flags(sub.logical, sub.logical.outputs)) {}

  std::string digest(const std::vector<StageUnit>& stage_units) {
    parallel();
    units(stage_units);
    return xxh3_128_hex(out_.bytes());
  }

 private:
  static std::vector<char> flags(const Graph& g, const std::vector<int>& which) {
    std::vector<char> f(g.tensors.size(), 0);
    for (int t : which) f[static_cast<size_t>(t)] = 1;
    return f;
  }

  // A logical tensor by its number; at its first appearance, what it is.
  void logical_tensor(int t) {
    bool fresh = false;
    out_.number(logical_.number(t, &fresh));
    if (!fresh) return;
    const TensorDecl& d = sub_.logical.tensors[static_cast<size_t>(t)];
    out_.numbers(d.shape);
    out_.text(dtype_name(d.dtype));
    // A stage's logical input is a tensor without a producer (stage_build).
    out_.number(sub_.logical.producer[static_cast<size_t>(t)] < 0);
    out_.number(is_output_[static_cast<size_t>(t)]);
  }

  void rank(int r) { out_.number(r < 0 ? -1 : ranks_.number(r)); }

  void lineage(const Lineage& of) {
    logical_tensor(of.logical);
    out_.slice(of.slice);
    out_.number(of.has_part), out_.number(of.part_k), out_.number(of.part_n);
    over(of.over);
    out_.number(of.scale_num), out_.number(of.scale_den);
  }

  void over(const OverSpec& over) {
    out_.number(static_cast<int64_t>(over.size()));
    for (const OverRange& o : over)
      out_.number(o.lo), out_.number(o.hi), out_.number(o.step), out_.number(o.count);
  }

  // The parallel graph in index order, names left out.
  void parallel() {
    const Graph& g = sub_.parallel;
    out_.text("parallel");
    out_.number(static_cast<int64_t>(g.tensors.size()));
    for (const TensorDecl& t : g.tensors) {
      out_.numbers(t.shape);
      out_.text(dtype_name(t.dtype));
      rank(t.rank);
      out_.number(t.of ? 1 : 0);
      if (t.of) lineage(*t.of);
    }
    out_.ints(g.inputs);
    out_.ints(g.outputs);
    out_.number(static_cast<int64_t>(g.ops.size()));
    for (const Op& op : g.ops) {
      out_.text(op.op);
      out_.ints(op.in);
      out_.ints(op.out);
      out_.attrs(op.attrs);
      rank(op.rank);
      out_.number(static_cast<int64_t>(op.group.size()));
      for (int r : op.group) rank(r);
    }
  }

  // A logical op by its number; at its first appearance, what it is.
  void logical_op(int i) {
    bool fresh = false;
    out_.number(logical_ops_.number(i, &fresh));
    if (!fresh) return;
    const Op& op = sub_.logical.ops[static_cast<size_t>(i)];
    out_.text(op.op);
    out_.attrs(op.attrs);
    out_.number(static_cast<int64_t>(op.in.size()));
    for (int t : op.in) logical_tensor(t);
    out_.number(static_cast<int64_t>(op.out.size()));
    for (int t : op.out) logical_tensor(t);
  }

  // The stage units in order: everything a stage is built from (its claim
  // group and the ops of its cones, stage.h) besides the parallel graph.
  void units(const std::vector<StageUnit>& units) {
    out_.text("units");
    out_.number(static_cast<int64_t>(units.size()));
    for (const StageUnit& u : units) {
      logical_tensor(u.logical);
      out_.slice(u.slice);
      out_.number(u.parts);
      over(u.over);
      out_.number(u.scale.first), out_.number(u.scale.second);
      out_.ints(u.members);
      out_.ints(u.parallel_cone);
      out_.number(static_cast<int64_t>(u.logical_cone.size()));
      for (int op : u.logical_cone) logical_op(op);
      out_.number(static_cast<int64_t>(u.restricted.size()));
      for (int op : u.restricted) logical_op(op);
    }
  }

  const Plan& sub_;
  const std::vector<char> is_output_;
  FieldWriter out_;
  FirstSeen logical_, logical_ops_, ranks_;
};

}  // namespace

std::string renamed_content_digest(const Plan& sub, const std::vector<StageUnit>& units) {
  return RenamedContent(sub).digest(units);
}

const VerifiedBatch* BatchReuse::find(const std::string& digest) const {
  auto it = batches_.find(digest);
  return it == batches_.end() ? nullptr : &it->second;
}

void BatchReuse::keep(const std::string& digest, const Report& report, const StageRecord& record,
                      std::vector<int> unit_of) {
  if (report.verdict != Verdict::Equivalent || !report.findings.empty()) return;
  VerifiedBatch& b = batches_[digest];
  b.unit_of = std::move(unit_of);
  b.verdict_keys = record.verdict_keys;
  b.decided = record.decided;
  b.report = report;
}

}  // namespace shardproof
