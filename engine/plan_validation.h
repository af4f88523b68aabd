// Internal to the plan parser (plan_parser.cpp, plan_validation_*.cpp): typed
// reads of JSON values that fail with a Diagnostic, and the graph and lineage
// checks. A check that fails throws InvalidPlan; parse_plan_* catch it, so no
// exception leaves the parser.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/diagnostic.h"
#include "engine/ir.h"
#include "engine/json_source.h"

namespace shardproof::plan_detail {

struct InvalidPlan {
  Diagnostic diag;
};

// A JSON value together with the file and JSON pointer it was read from.
class Node {
 public:
  Node(const jsonsrc::Value& value, const std::string& file, std::string pointer)
      : v_(&value), file_(&file), ptr_(std::move(pointer)) {}

  const jsonsrc::Value& value() const { return *v_; }
  const jsonsrc::Value* operator->() const { return v_; }
  const std::string& file() const { return *file_; }
  const std::string& pointer() const { return ptr_; }

  Node item(size_t i) const;
  Node member(size_t i) const;  // the value of an object's i-th member
  std::optional<Node> get(const std::string& key) const;

  [[noreturn]] void fail(const std::string& rule, const std::string& message) const;
  // At the i-th key of this object (unknown keys): the key itself is wrong.
  [[noreturn]] void fail_at_key(size_t i, const std::string& rule,
                                const std::string& message) const;
  // A required key is absent: points where it should be, at this object.
  [[noreturn]] void fail_missing(const std::string& key, const std::string& rule,
                                 const std::string& what) const;

 private:
  const jsonsrc::Value* v_;
  const std::string* file_;
  std::string ptr_;
};

// Each fails with rule "type" unless told, saying what was expected and found.
void expect_object(const Node& n, const std::string& what);
void expect_array(const Node& n, const std::string& what, const std::string& rule = "type");
const std::string& expect_string(const Node& n, const std::string& what,
                                 const std::string& rule = "type");
// An integer in [lo, hi] (integer-valued JSON numbers only, exactly).
int64_t expect_int(const Node& n, const std::string& rule, const std::string& what, int64_t lo,
                   int64_t hi);
// Rejects any key of `obj` not in `allowed` (rule "unknown-key").
void check_keys(const Node& obj, std::initializer_list<std::string_view> allowed,
                const std::string& what);
Node require(const Node& obj, const std::string& key, const std::string& what,
             const std::string& rule = "missing-key");

// Positions kept from reading a graph, for messages of later checks.
struct GraphSyntax {
  std::optional<Node> root;
  std::vector<Node> tensor_decls;             // per tensor
  std::vector<std::optional<Node>> of_nodes;  // per tensor: its "of", if any
  std::vector<Node> ops;                      // per op
  std::optional<Node> inputs, outputs;
};

// Reads one graph and checks every rule that concerns it alone (structure,
// SSA, placement, acyclicity, operator shape rules); fills `g` completely
// except lineage.
GraphSyntax read_graph(const Node& node, bool parallel, Graph& g);

// Lineage rules of a parallel graph against the logical one: fills each
// TensorDecl::of.
void check_lineage(const Graph& logical, const GraphSyntax& logical_syntax, Graph& parallel,
                   const GraphSyntax& parallel_syntax);

// One map fn used with two arities anywhere in the plan is invalid.
void check_map_arity(const std::vector<std::pair<const Graph*, const GraphSyntax*>>& graphs);

// "h[0:8, 4:8]" (+ " part 1 of 2").
std::string claim_text(const Lineage& lin);

}  // namespace shardproof::plan_detail
