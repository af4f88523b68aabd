// Where the transformer builder writes: a v1 graph (one tensor and op per
// rank and micro-batch) or a compact one (shardproof-plan/1.1: one template
// per pipeline stage, the coordinates being the mesh axes). The builder runs
// the same code for both; only its loops over ranks and micro-batches, and
// the few places where a rank or micro-batch is singled out, differ.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/affine.h"
#include "planner/plan_builder.h"

namespace shardproof::planner::transformer {

// Where a local computation runs: dp rank, cp rank, tp rank, pipeline stage
// and micro-batch. The stage is a constant (one program per stage), or in the
// compact form kEveryStage: the pp axis itself, in a program that runs on
// every stage (the gradient norm, whose all-reduce spans the stages).
inline constexpr int kEveryStage = -1;
struct Coord {
  Ix d = 0, c = 0, t = 0;
  int p = 0;
  Ix m = 0;
};

using SymRange = std::pair<Aff, Aff>;
using SymSlice = std::vector<SymRange>;
Shape extent(const SymSlice& slice);

// A local tensor's claim: logical[slice], or part k of n of it.
struct SymClaim {
  std::string tensor;
  SymSlice slice;  // empty: the whole logical tensor
  Aff k = 0;
  int64_t n = 1;
  // A contraction's partial sum over this index set (empty: none).
  struct Over {
    Aff lo, hi;
    int64_t step = 0, count = 1;  // `count` blocks lo:hi, `step` apart
  };
  std::vector<Over> over = {};
};

// A collective's members: ranks (v1) or the mesh axes they vary along (compact).
struct Group {
  Group(std::vector<int> r = {}) : ranks(std::move(r)) {}  // NOLINT
  Group(std::initializer_list<int> r) : ranks(r) {}
  static Group along(std::vector<std::string> a) {
    Group g;
    g.axes = std::move(a);
    return g;
  }
  std::vector<int> ranks;
  std::vector<std::string> axes;
};

class Graph {
 public:
  virtual ~Graph() = default;
  virtual bool compact() const = 0;
  // A tensor on x's rank (in the compact form: in x's stage's program).
  virtual void tensor(const Coord& x, const std::string& name, const Shape& shape,
                      std::optional<SymClaim> of, const std::string& dtype) = 0;
  virtual void input(const std::string& name) = 0;
  virtual void output(const std::string& name) = 0;
  virtual void op(const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out,
                  nlohmann::json attrs = nlohmann::json::object()) = 0;
  // In the compact form `in` and `out` hold one member's tensor.
  virtual void collective(const std::string& name, const std::string& op,
                          std::vector<std::string> in, std::vector<std::string> out,
                          const Group& group, nlohmann::json attrs = nlohmann::json::object()) = 0;
  // A pipeline send from `from`'s rank to `to`'s (which differ in stage only).
  virtual void send(const std::string& name, const Coord& from, const Coord& to,
                    const std::string& in, const std::string& out) = 0;
  virtual bool has_tensor(const std::string& name) const = 0;
  virtual const Shape& shape(const std::string& name) const = 0;

  // Compact form: the condition the elements written in the scope carry
  // ("tp == 0"), on top of the enclosing scope's.
  class When {
   public:
    When(Graph& g, const std::string& condition);
    ~When() { g_.when_ = saved_; }
    When(const When&) = delete;
    When& operator=(const When&) = delete;

   private:
    Graph& g_;
    std::string saved_;
  };

 protected:
  std::string when_;
};

}  // namespace shardproof::planner::transformer
