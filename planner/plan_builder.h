// A small builder for format-v1 graphs: tensors with shapes, ranks and
// lineage claims, ops and collectives. Every model family writes its graphs
// through it, so the JSON layout lives in one place and internal mistakes
// (a duplicate name, a claim whose extent is not the tensor's shape) fail
// here, loudly, instead of producing an invalid plan.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardproof::planner {

using Shape = std::vector<int64_t>;
using Range = std::pair<int64_t, int64_t>;  // half-open [lo, hi)
using Slice = std::vector<Range>;           // one range per logical dimension

// One axis of a restricted claim: `count` blocks [lo + i*step, hi + i*step).
struct OverBlocks {
  int64_t lo = 0, hi = 0, step = 0, count = 1;
};

// A parallel tensor's "of": it equals logical[slice] or is part k of n.
struct Claim {
  std::string tensor;
  Slice slice;  // empty: the whole logical tensor
  int64_t k = 0;
  int64_t n = 1;                      // n == 1: a plain claim (no "part" is written)
  std::vector<OverBlocks> over = {};  // a contraction's partial sum (empty: none)
};

// An exact constant as the format's "p/q" string (reduced; "3" if integral).
std::string fraction(int64_t p, int64_t q);

// The shape of a slice: the extent of each range.
Shape extent(const Slice& slice);

class GraphBuilder {
 public:
  // `logical` (parallel graphs only) is the graph claims refer to: each
  // claim is checked against it when declared.
  explicit GraphBuilder(const GraphBuilder* logical = nullptr, int world = 0)
      : logical_(logical), world_(world) {}

  // Declares a tensor; `rank` < 0 for the logical graph.
  void tensor(const std::string& name, Shape shape, int rank = -1,
              std::optional<Claim> of = std::nullopt, const std::string& dtype = "f32");
  void input(const std::string& name);
  void output(const std::string& name);

  // A local op: every tensor must already be declared, all on one rank.
  void op(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out, nlohmann::json attrs = nlohmann::json::object());
  // A collective over `group` (input i and output i on group[i]).
  void collective(const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, std::vector<int> group,
                  nlohmann::json attrs = nlohmann::json::object());

  bool has_tensor(const std::string& name) const { return tensors_.count(name) > 0; }
  const Shape& shape(const std::string& name) const;
  int rank(const std::string& name) const;

  nlohmann::json to_json() const;

 private:
  struct TensorInfo {
    Shape shape;
    int rank = -1;
    std::optional<Claim> of;
    std::string dtype;
  };
  void check_claim(const std::string& name, const TensorInfo& t) const;
  void require(const std::string& name) const;

  const GraphBuilder* logical_;
  int world_;
  std::map<std::string, TensorInfo> tensors_;
  std::vector<std::string> inputs_, outputs_;
  nlohmann::json ops_ = nlohmann::json::array();
  std::map<std::string, bool> op_names_;
};

}  // namespace shardproof::planner
