// What operators say about integer values (docs/soundness.md, 3.1): the
// AxisRelations implementation that fills the lines and the position facts.
#pragma once

#include <optional>
#include <vector>

#include "engine/ops/op_def.h"
#include "engine/stage/axis_lines.h"
#include "engine/stage/value_variation.h"

namespace shardproof::reduction {

// ---------------------------------------------------------------- integer positions

// A const used as the constant of add/sub on a position:
// values(to) = values(from) + sign * constant.
struct ShiftUse {
  int constant;                // stage tensor of the const
  int from_tensor, to_tensor;  // stage tensors of the position operand and the result
  int from, to;                // their value nodes
  int sign;
};

// What the operators said about integer values, beyond the union-find.
struct PositionFacts {
  // Per stage tensor: the value of an integer `const` op's output.
  std::vector<std::optional<int64_t>> const_value;
  std::vector<ShiftUse> shifts;
};

// Constants beyond this magnitude are never mapped (no overflow in offsets).
constexpr int64_t kMaxPositionConstant = int64_t{1} << 40;

inline PositionFacts position_facts(const Stage& stage) {
  PositionFacts facts;
  facts.const_value.resize(stage.tensors.size());
  for (const StageOp& op : stage.ops) {
    if (op.op != "const" || op.out.size() != 1 || !is_integer(stage.tensors[op.out[0]])) continue;
    auto it = op.attrs.find("value");
    if (it == op.attrs.end() || !it->second.is_int()) continue;
    int64_t v = it->second.as_int();
    if (v > -kMaxPositionConstant && v < kMaxPositionConstant) facts.const_value[op.out[0]] = v;
  }
  return facts;
}

class AxisRelationsImpl : public AxisRelations {
 public:
  // `record` keeps the op's relations by operand slot (value_variation.h).
  AxisRelationsImpl(AxisLines& lines, const StageOp& op, PositionFacts& facts, OpAxes& record)
      : lines_(lines),
        op_(op),
        facts_(facts),
        record_(record),
        mentioned_(op.in.size() + op.out.size()) {}
  void same(AxisRef a, AxisRef b) override {
    record_.pairs.push_back({a, b});
    lines_.relate(axis(a), axis(b), 0);
  }
  void sub_range(AxisRef part, AxisRef whole, int64_t offset) override {
    record_.pairs.push_back({part, whole});
    lines_.relate(axis(part), axis(whole), offset);
  }
  void product(AxisRef whole, const std::vector<AxisRef>& factors) override {
    record_.products.push_back({whole, factors});
    std::vector<int> ids;
    for (AxisRef f : factors) ids.push_back(axis(f));
    lines_.product(axis(whole), ids);
  }
  void freeze(AxisRef a) override { lines_.freeze(axis(a)); }
  void combine(AxisRef a) override { record_.combines.push_back(a); }

  void positions_on(int values, AxisRef target) override {
    int v = value(values);
    if (v < 0) return freeze(target);
    lines_.relate(v, axis(target), 0);
  }
  void same_positions(int a, int b) override {
    int va = value(a), vb = value(b);
    if (va >= 0 && vb >= 0) lines_.relate(va, vb, 0);
  }
  // Only a position plus or minus a constant is a position: out = a + sign*c
  // puts out's values at offset -sign*c from a's. Anything else is opaque.
  void shifted_positions(int out, int a, int b, int sign) override {
    int vo = value(out), va = value(a), vb = value(b);
    if (vo < 0 || va < 0 || vb < 0) return;
    std::optional<int64_t> ca = constant(a), cb = constant(b);
    if (cb && !ca) {
      lines_.relate(vo, va, -sign * *cb);
      facts_.shifts.push_back({tensor(b), tensor(a), tensor(out), va, vo, sign});
    } else if (ca && !cb && sign > 0) {
      lines_.relate(vo, vb, -*ca);
      facts_.shifts.push_back({tensor(a), tensor(b), tensor(out), vb, vo, sign});
    } else {
      for (int v : {vo, va, vb}) lines_.mark_opaque(v);
    }
  }
  // Equality of two positions survives every injective map; order only
  // survives against a constant (a boundary or outside the line), since
  // within a piece the argument permutes positions freely.
  void compared_positions(int a, int b, bool ordered) override {
    int va = value(a), vb = value(b);
    if (va < 0 || vb < 0) return;
    if (ordered && !constant(a) && !constant(b)) {
      lines_.mark_opaque(va);
      lines_.mark_opaque(vb);
      return;
    }
    lines_.relate(va, vb, 0);
  }

  // Integer operands the operator did not mention are opaque uses.
  void finish(const Stage& stage) {
    for (size_t s = 0; s < mentioned_.size(); ++s) {
      int t = tensor(static_cast<int>(s));
      if (!mentioned_[s] && is_integer(stage.tensors[t])) lines_.mark_opaque(lines_.value(t));
    }
  }

 private:
  int tensor(int slot) const {
    int n_in = static_cast<int>(op_.in.size());
    return slot < n_in ? op_.in[slot] : op_.out[slot - n_in];
  }
  int axis(AxisRef r) const { return lines_.axis(tensor(r.slot), r.dim); }
  int value(int slot) {
    mentioned_.at(slot) = true;
    return lines_.value(tensor(slot));
  }
  std::optional<int64_t> constant(int slot) const { return facts_.const_value[tensor(slot)]; }

  AxisLines& lines_;
  const StageOp& op_;
  PositionFacts& facts_;
  OpAxes& record_;
  std::vector<bool> mentioned_;
};

// Lines whose positions integer values refer to ("position lines"), which of
// them must keep full size, and how many pieces' worth of positions the

}  // namespace shardproof::reduction
