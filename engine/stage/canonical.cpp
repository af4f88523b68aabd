#include "engine/stage/canonical.h"

#include "engine/core/digest.h"
#include "engine/core/field_writer.h"
#include "engine/core/z3_version.h"
#include "engine/ops/full_sizes.h"
#include "engine/ops/op_registry.h"

namespace shardproof {
namespace {
// Length-prefixed fields keep the encoding unambiguous.
using Writer = FieldWriter;
}  // namespace

namespace {

// What of the full sizes a form writes: all (the stage key), the full
// shapes without the full positions (the verdict key), or only the full
// sizes the ops' semantics read (the proof key).
enum class Form { Stage, Verdict, Proof };

// The full sizes `op` reads (full_sizes.h), as (input, dim, size).
void write_full_sizes_read(Writer& w, const Stage& stage, const StageOp& op) {
  std::vector<Shape> full;
  for (int t : op.in) full.push_back(stage.tensors[static_cast<size_t>(t)].full_shape);
  const std::vector<Shape> read = declared_full_shapes(op.op, op.attrs, std::move(full));
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < read.size(); ++i)
    for (size_t d = 0; d < read[i].size(); ++d)
      if (read[i][d] != kUnreadFullSize) {
        sizes.push_back(static_cast<int64_t>(i));
        sizes.push_back(static_cast<int64_t>(d));
        sizes.push_back(read[i][d]);
      }
  w.numbers(sizes);
}

std::string form_bytes(const Stage& stage, Form form) {
  const bool with_full_size = form == Form::Stage;
  Writer w;
  w.text(form == Form::Proof ? "shardproof-proof" : "shardproof-stage");
  w.number(stage.target);
  w.slice(stage.slice);
  w.number(stage.parts);
  w.ints(stage.members);
  w.number(stage.reduced ? 1 : 0);
  w.number(static_cast<int64_t>(stage.tensors.size()));
  for (const StageTensor& t : stage.tensors) {
    w.number(t.parallel ? 1 : 0);
    w.numbers(t.shape);
    // Full sizes are in the verdict too: a mean divides by its full-size
    // count (OpCall::full_in_shapes), so two stages reduced alike but cut
    // from lines of different lengths can get different verdicts. The proof
    // form writes, per op, only the sizes its semantics read (below).
    if (form != Form::Proof) w.numbers(t.full_shape);
    w.text(dtype_name(t.dtype));
    w.number(t.free ? 1 : 0);
    w.number(t.logical_input ? 1 : 0);
    w.number(t.logical_index);
    if (t.of) {
      w.slice(t.of->slice);
      w.number(t.of->has_part ? 1 : 0);
      w.number(t.of->part_k);
      w.number(t.of->part_n);
      // A restricted claim's box is in the ops that compute its logical
      // tensor (logical_index), at reduced positions; only its rank here.
      w.number(static_cast<int64_t>(t.of->over.size()));
      // A scaled claim's factor (never written for 1: unscaled stages keep
      // their keys), so a wrong scale never shares the right one's key.
      if (t.of->scaled()) {
        w.tag("s");
        w.number(t.of->scale_num);
        w.number(t.of->scale_den);
      }
    } else {
      w.number(-1);
    }
  }
  // Positions kept by reduction (none written when the stage kept full size:
  // the sizes above say so).
  if (with_full_size) {
    w.number(static_cast<int64_t>(stage.full_position.size()));
    for (size_t t = 0; t < stage.full_position.size(); ++t)
      for (const std::vector<int64_t>& dim : stage.full_position[t]) w.numbers(dim);
  }
  w.number(static_cast<int64_t>(stage.ops.size()));
  for (const StageOp& op : stage.ops) {
    w.text(op.op);
    w.number(op.parallel ? 1 : 0);
    w.ints(op.in);
    w.ints(op.out);
    // Rank numbers do not matter, only the group's size: the i-th input is
    // the i-th member, and the input order is encoded above.
    w.number(static_cast<int64_t>(op.group.size()));
    w.attrs(op.attrs);
    if (form == Form::Proof) write_full_sizes_read(w, stage, op);
  }
  // Integer values mapped onto reduced lines (findings report them at full
  // size). Written only when present, so other stages keep their keys.
  bool any_value_map = false;
  for (const std::optional<ValueMap>& m : stage.value_maps) any_value_map |= m.has_value();
  if (any_value_map) {
    w.text("value-maps");
    w.number(static_cast<int64_t>(stage.value_maps.size()));
    for (const std::optional<ValueMap>& m : stage.value_maps) {
      w.number(m ? 1 : 0);
      if (!m) continue;
      if (with_full_size) w.numbers(m->full_bounds);
      w.numbers(m->reduced_bounds);
      if (with_full_size) w.number(m->full_offset);
      w.number(m->reduced_offset);
    }
  }
  return w.take();
}

}  // namespace

std::string canonical_bytes(const Stage& stage, bool with_full_size) {
  return form_bytes(stage, with_full_size ? Form::Stage : Form::Verdict);
}

std::string proof_bytes(const Stage& stage) {
  return form_bytes(stage, Form::Proof);
}

std::string proof_key(const Stage& stage) {
  std::string bytes = proof_bytes(stage);
  bytes += "|engine=" + std::to_string(kEngineVersion);
  bytes += "|semantics=" + std::to_string(OpRegistry::kSemanticsVersion);
  bytes += "|z3=" + z3_version();
  return xxh3_128_hex(bytes);
}

std::string verdict_key(const Stage& stage) {
  std::string bytes = canonical_bytes(stage, false);
  bytes += "|engine=" + std::to_string(kEngineVersion);
  return xxh3_128_hex(bytes);
}

std::string stage_key(const Stage& stage) {
  std::string bytes = canonical_bytes(stage);
  bytes += "|engine=" + std::to_string(kEngineVersion);
  bytes += "|semantics=" + std::to_string(OpRegistry::kSemanticsVersion);
  bytes += "|z3=" + z3_version();
  return xxh3_128_hex(bytes);
}

}  // namespace shardproof
