// The in-memory form of a validated plan (plan-format-v1.md): two SSA graphs
// whose tensors and ops are addressed by index. Produced only by the parser,
// which has already checked every rule of the contract.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/core/attr.h"

namespace shardproof {

using Shape = std::vector<int64_t>;

enum class DType { F32, F16, BF16, F64, I32, I64, Bool };
// Real, integer or boolean: the value domain the verifier reasons in.
enum class DClass { Real, Int, Bool };

DClass dclass_of(DType t);
const char* dtype_name(DType t);
std::optional<DType> parse_dtype(const std::string& name);
const char* dclass_name(DClass c);
int64_t element_count(const Shape& shape);
std::string shape_to_string(const Shape& shape);

// One [lo, hi) range per dimension of a logical tensor.
using SliceSpec = std::vector<std::pair<int64_t, int64_t>>;
// "[0:4, 2:8]": a box of [lo, hi) ranges, for messages.
std::string box_to_string(const SliceSpec& box);

// One axis of a restricted claim's index set ("over"): `count` blocks
// [lo + i*step, hi + i*step), i = 0..count-1, with step >= hi - lo so they
// never overlap. One block (count 1) is the plain range lo:hi; more name the
// rows a rank owns when its micro-batches' rows are interleaved with other
// ranks' (docs/plan-format.md, "over").
struct OverRange {
  int64_t lo = 0, hi = 0, step = 0, count = 1;
  int64_t last_hi() const { return hi + (count - 1) * step; }
  std::pair<int64_t, int64_t> block(int64_t i) const { return {lo + i * step, hi + i * step}; }
  auto operator<=>(const OverRange&) const = default;
};
using OverSpec = std::vector<OverRange>;
// "[64:96]", or "[64:96 step 128 x4]" for a strided axis, for messages.
std::string over_to_string(const OverSpec& over);

// A parallel tensor's claim ("of"): it equals logical[slice], or is part k of n.
struct Lineage {
  std::string tensor;  // logical tensor name
  int logical = -1;    // its index in the logical graph (filled by the parser)
  SliceSpec slice;     // always filled (default: the whole logical tensor)
  bool has_part = false;
  int64_t part_k = 0;
  int64_t part_n = 1;
  // A restricted claim (docs/plan-format.md, "over"): the tensor holds the
  // logical tensor's producer with its contraction limited to this set, one
  // OverRange per axis of the index box (engine/core/contraction.h). Empty: none.
  OverSpec over;
  // A scaled claim (docs/plan-format.md, "scale"): the tensor is scale x
  // the claimed slice, part or restricted sum; a nonzero exact rational in
  // lowest terms with a positive denominator. 1/1: no scale (the keys of
  // unscaled claims never change).
  int64_t scale_num = 1, scale_den = 1;
  bool scaled() const { return scale_num != 1 || scale_den != 1; }
  Rational scale() const { return Rational(scale_num) / Rational(scale_den); }
};

struct TensorDecl {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  int rank = -1;  // parallel graph only
  std::optional<Lineage> of;
  std::string pointer;  // JSON pointer of the declaration, for messages
};

// Where in a user's program an op came from (a captured plan's "src"). It
// never reaches a stage: a verdict cannot depend on it, only what findings
// point at.
struct SourceRef {
  std::string file;
  int64_t line = 0;      // 1-based
  std::string function;  // may be empty
};
// "model.py:42" or "model.py:42 (forward)", for messages.
std::string source_to_string(const SourceRef& src);

struct Op {
  std::string name;          // may be empty; display_name() falls back to "#index op"
  std::string op;            // operator name, e.g. "matmul"
  std::vector<int> in, out;  // tensor indices
  AttrMap attrs;
  std::vector<int> group;  // collectives: ranks, in group order
  int rank = -1;           // parallel non-collective ops: the rank they run on
  std::string pointer;     // JSON pointer of the op, for messages
  int index = 0;           // position in the plan's ops list
  // Captured plans: where the op came from (shared by the ops of one line).
  std::shared_ptr<const SourceRef> src;

  std::string display_name() const;
};

struct Graph {
  bool parallel = false;
  int world = 0;  // parallel graph only
  std::vector<TensorDecl> tensors;
  std::unordered_map<std::string, int> tensor_index;
  std::vector<int> inputs, outputs;  // tensor indices
  std::vector<Op> ops;               // as in the plan
  std::vector<int> producer;         // tensor index -> op index, -1 for inputs
  std::vector<int> topo_order;       // op indices, producers first
  std::vector<int> topo_rank;        // op index -> its position in topo_order
  std::string source_file;           // file the graph was read from

  int find(const std::string& name) const;  // -1 when absent
};

namespace compact {
struct CompactSource;
}

struct Plan {
  std::string format;  // "shardproof-plan/1"
  std::string name;
  std::string meta_json;      // free-form meta, re-serialised for reports
  std::string schedule_json;  // the "schedule" section as compact JSON ("" when absent)
  std::string path;
  Graph logical, parallel;
  // A compact plan too large to expand (plan_parser.h, ParseOptions): its
  // templates, for the class verifier; `parallel` is then empty.
  std::shared_ptr<const compact::CompactSource> compact;
};

}  // namespace shardproof
