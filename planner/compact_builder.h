// A small builder for compact parallel graphs (shardproof-plan/1.1): a mesh
// and programs of tensor and op templates whose names, slices and conditions
// are affine in the mesh coordinates (docs/plan-format.md). The JSON layout
// of the compact form lives here, as plan_builder.h holds v1's.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace shardproof::planner {

// An affine expression: a JSON integer or a string such as "tp*64 + 64".
using Expr = nlohmann::json;
using ExprRange = std::pair<Expr, Expr>;

// A template's "of": logical[slice], or part k of n (n == 1: no part).
struct ClaimTemplate {
  std::string tensor;
  std::vector<ExprRange> slice = {};  // empty: the whole tensor
  Expr k = 0;
  int64_t n = 1;
  // A contraction's partial sum (empty: none): per axis [lo, hi], or `count`
  // blocks `step` apart.
  struct Over {
    Expr lo, hi;
    int64_t step = 0, count = 1;
  };
  std::vector<Over> over = {};
};

struct TensorTemplate {
  std::string name;
  std::vector<int64_t> shape;
  std::optional<ClaimTemplate> of = std::nullopt;
  std::string when = "";
  bool input = false, output = false;
  std::string dtype = "f32";
};

class CompactBuilder {
 public:
  // `axes`: device axes, slowest first (rank order); `mb`: micro-batches.
  CompactBuilder(std::vector<std::pair<std::string, int>> axes, int mb);

  // Starts a program; later templates belong to it. Returns its index.
  size_t program(const std::string& name, const std::string& on);
  // Makes an earlier program the one later templates belong to (a builder
  // that walks the step in schedule order visits the stages by turns).
  void select(size_t program);
  // Returns the template's index in its program.
  size_t tensor(TensorTemplate t);
  // Sets a tensor template's "input" or "output" flag after the fact.
  void mark(size_t program, size_t tensor, const std::string& flag);
  // A local op, or (with `group`, a list of axes) a collective.
  void op(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out, nlohmann::json attrs = nlohmann::json::object(),
          const std::string& when = "");
  void collective(const std::string& name, const std::string& op, const std::string& in,
                  const std::string& out, std::vector<std::string> group,
                  nlohmann::json attrs = nlohmann::json::object(), const std::string& when = "");
  void send(const std::string& name, const std::string& in, const std::string& out,
            nlohmann::json to, const std::string& when = "");

  nlohmann::json to_json() const;

 private:
  nlohmann::json& current();
  nlohmann::json mesh_;
  nlohmann::json programs_ = nlohmann::json::array();
  size_t current_ = 0;
};

// "a && b", skipping empty parts.
std::string all_of(std::initializer_list<std::string> parts);

// The coordinates a bug is limited to: each listed axis (of `size`) in
// [lo, hi]. An injected bug is written as the buggy template under inside()
// beside the correct one under each piece of outside().
struct Site {
  struct Range {
    std::string axis;
    int64_t lo, hi, size;
  };
  std::vector<Range> ranges;

  std::string inside() const;
  // Disjoint conjunctions that cover everything else (conditions have no ||).
  std::vector<std::string> outside() const;
};

}  // namespace shardproof::planner
