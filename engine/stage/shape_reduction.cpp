#include "engine/stage/shape_reduction.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "engine/ops/op_registry.h"
#include "engine/stage/axis_lines.h"
#include "engine/stage/line_maps.h"
#include "engine/stage/position_facts.h"
#include "engine/stage/position_lines.h"
#include "engine/stage/value_variation.h"

namespace shardproof {
namespace {

using namespace reduction;

// ---------------------------------------------------------------- attempts

std::vector<TensorInfo> infos(const Stage& s, const std::vector<int>& ids, bool full) {
  std::vector<TensorInfo> out;
  for (int t : ids)
    out.push_back({full ? s.tensors[t].full_shape : s.tensors[t].shape, s.tensors[t].dtype});
  return out;
}

// What earlier attempts learned must keep full size.
struct Restrictions {
  std::set<int> frozen_tensors;  // every axis at full size
  std::set<int> opaque_tensors;  // the line of their values at full size
};

enum Failure : int { kOk = -1, kLineage = -2, kUnmappable = -3, kConstant = -4 };

// Relates every axis and integer value of the stage: operators, lineage,
// and what earlier attempts froze.
void relate_stage(const Stage& stage, const Restrictions& restrictions, bool sound,
                  AxisLines& lines, PositionFacts& facts) {
  const OpRegistry& registry = OpRegistry::instance();
  std::vector<OpAxes> axes(stage.ops.size());
  for (size_t i = 0; i < stage.ops.size(); ++i) {
    const StageOp& op = stage.ops[i];
    AxisRelationsImpl rel(lines, op, facts, axes[i]);
    registry.find(op.op)->relate_axes(op.attrs, infos(stage, op.in, true),
                                      infos(stage, op.out, true), rel);
    rel.finish(stage);
  }
  // Sums whose terms may repeat along the summed line, or saturate, keep it whole.
  if (sound)
    for (auto [t, d] : count_exposing_axes(stage, axes)) lines.freeze(lines.axis(t, d));
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    int ti = static_cast<int>(t);
    if (st.of && st.logical_index >= 0) {
      for (size_t d = 0; d < st.full_shape.size(); ++d)
        lines.relate(lines.axis(ti, d), lines.axis(st.logical_index, d), st.of->slice[d].first);
      // A claim holds its logical slice's values; a part of an integer
      // tensor is arithmetic on them, which no map preserves.
      if (st.of->has_part) {
        lines.mark_opaque(lines.value(ti));
        lines.mark_opaque(lines.value(st.logical_index));
      } else if (lines.value(ti) >= 0 && lines.value(st.logical_index) >= 0) {
        lines.relate(lines.value(ti), lines.value(st.logical_index), 0);
      }
    }
    if (restrictions.frozen_tensors.count(ti))
      for (size_t d = 0; d < st.full_shape.size(); ++d) lines.freeze(lines.axis(ti, d));
    if (restrictions.opaque_tensors.count(ti)) lines.mark_opaque(lines.value(ti));
  }
}

// Decides every line's layout: which lines keep full size, and the piece
// cap of each position line (computed from the other lines' reduced sizes;
// sources with axes on position lines count at full size there).
void layout(const AxisLines& lines, const PositionLines& positions, int64_t piece, bool sound,
            LineMaps& maps) {
  std::set<int> frozen = lines.frozen_roots(sound);
  std::set<int> more = positions.freezes(frozen);
  frozen.insert(more.begin(), more.end());
  std::set<int> sizing = frozen;
  sizing.insert(positions.roots().begin(), positions.roots().end());
  maps.build(sizing, {}, piece);
  std::map<int, int64_t> caps = positions.caps(frozen, maps);
  for (auto& [root, cap] : caps) cap = sound ? cap + piece - 2 : piece;  // K + piece
  maps.build(frozen, caps, piece);
}

// One reduction attempt under `restrictions`. Returns kOk, a Failure, or the
// index of an op whose reduced shapes do not check; for kConstant,
// `opaque` lists the tensors whose value lines must keep full size; for
// kLineage, `claim` is the parallel tensor whose claim no longer fits.
int attempt(const Stage& original, const Restrictions& restrictions, int64_t piece, bool sound,
            Stage& result, std::vector<int>& opaque, int& claim) {
  const OpRegistry& registry = OpRegistry::instance();
  AxisLines lines(original);
  PositionFacts facts = position_facts(original);
  relate_stage(original, restrictions, sound, lines, facts);
  lines.resolve_products();
  std::optional<LineMaps> laid_out;
  for (;;) {
    laid_out.emplace(lines, !sound);
    if (laid_out->cut_products().empty()) break;
    lines.break_products(laid_out->cut_products());
  }
  LineMaps& maps = *laid_out;
  PositionLines positions(original, lines, maps, facts);
  layout(lines, positions, piece, sound, maps);
  std::map<int, int64_t> constants = positions.constants(maps, opaque);
  if (!opaque.empty()) return kConstant;
  auto map_axis = [&](int a, int64_t p) { return maps.map_axis(a, p); };

  result = original;
  result.value_maps = positions.value_maps(maps);
  for (size_t t = 0; t < original.tensors.size(); ++t) {
    StageTensor& st = result.tensors[t];
    for (size_t d = 0; d < st.full_shape.size(); ++d) {
      int a = lines.axis(t, d);
      st.shape[d] = map_axis(a, st.full_shape[d]);
      auto [root, offset] = lines.find(a);
      int64_t start = maps.map(root, offset);
      if (result.full_position.size() != original.tensors.size()) {
        result.full_position.assign(original.tensors.size(), {});
        for (size_t u = 0; u < original.tensors.size(); ++u)
          result.full_position[u].resize(original.tensors[u].full_shape.size());
      }
      std::vector<int64_t>& positions = result.full_position[t][d];
      positions = maps.unmap_run(root, start, st.shape[d]);
      for (int64_t& p : positions) p -= offset;
    }
    if (st.of && st.logical_index >= 0)
      for (size_t d = 0; d < st.full_shape.size(); ++d) {
        int la = lines.axis(st.logical_index, d);
        auto& range = st.of->slice[d];
        range = {map_axis(la, range.first), map_axis(la, range.second)};
        if (range.second - range.first != st.shape[d]) {
          claim = static_cast<int>(t);
          return kLineage;
        }
      }
  }
  for (size_t d = 0; d < result.slice.size(); ++d) {
    int la = lines.axis(result.target, d);
    result.slice[d] = {map_axis(la, result.slice[d].first), map_axis(la, result.slice[d].second)};
  }
  for (size_t i = 0; i < result.ops.size(); ++i) {
    StageOp& op = result.ops[i];
    const OpDef* def = registry.find(op.op);
    std::vector<Shape> red_in, red_out;
    for (int t : op.in) red_in.push_back(result.tensors[t].shape);
    for (int t : op.out) red_out.push_back(result.tensors[t].shape);
    int n_in = static_cast<int>(op.in.size());
    PositionMap position = [&](AxisRef r, int64_t p) {
      int t = r.slot < n_in ? op.in[r.slot] : op.out[r.slot - n_in];
      return map_axis(lines.axis(t, r.dim), p);
    };
    op.attrs = def->reduce_attrs(op.attrs, red_in, red_out, position);
    if (op.op == "const" && constants.count(op.out.at(0)))
      op.attrs["value"] = Attr::of_int(constants.at(op.out[0]));
    std::vector<TensorInfo> out;
    if (!def->infer(op.attrs, infos(result, op.in, false), op.out.size(), out).empty())
      return static_cast<int>(i);
    for (size_t k = 0; k < out.size(); ++k)
      if (out[k].shape != result.tensors[op.out[k]].shape) return static_cast<int>(i);
  }
  return kOk;
}

void reduce(Stage& stage, int64_t piece, bool sound) {
  Restrictions restrictions;
  for (int round = 0; round < 16; ++round) {
    Stage result;
    int failed;
    int claim = -1;
    std::vector<int> opaque;
    try {
      failed = attempt(stage, restrictions, piece, sound, result, opaque, claim);
    } catch (const std::exception& e) {
      failed = kUnmappable;
    }
    if (failed == kOk) {
      result.reduced = true;
      if (!restrictions.frozen_tensors.empty() || !restrictions.opaque_tensors.empty())
        result.reduction_note = "some axes kept full size: reduced shapes did not check";
      stage = std::move(result);
      return;
    }
    if (failed == kConstant) {
      // A const's uses want different reduced values: keep their lines whole.
      size_t before = restrictions.opaque_tensors.size();
      restrictions.opaque_tensors.insert(opaque.begin(), opaque.end());
      if (restrictions.opaque_tensors.size() == before) break;
      continue;
    }
    size_t before = restrictions.frozen_tensors.size();
    if (failed == kLineage && claim >= 0) {
      // A claim whose slice no longer fits (its lines relate at offsets that
      // contradict each other, as a wrong-offset bug makes them): keep the
      // claiming tensor and its logical tensor whole, reduce the rest.
      restrictions.frozen_tensors.insert(claim);
      restrictions.frozen_tensors.insert(stage.tensors[claim].logical_index);
    } else if (failed < 0) {
      break;  // an unmappable position: give up reducing
    } else {
      for (int t : stage.ops[failed].in) restrictions.frozen_tensors.insert(t);
      for (int t : stage.ops[failed].out) restrictions.frozen_tensors.insert(t);
    }
    if (restrictions.frozen_tensors.size() == before) break;
  }
  stage.reduction_note = "kept full sizes: no sound reduction found";
}

}  // namespace

void reduce_stage(Stage& stage, int64_t piece) {
  reduce(stage, piece, true);
}

void reduce_stage_for_proposals(Stage& stage) {
  reduce(stage, 2, false);
}

}  // namespace shardproof
