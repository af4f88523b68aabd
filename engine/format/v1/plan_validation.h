// Internal to the plan parser (plan_parser.cpp, plan_validation_*.cpp): typed
// reads of JSON values that fail with a Diagnostic, and the graph and lineage
// checks. A check that fails throws InvalidPlan; parse_plan_* catch it, so no
// exception leaves the parser.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "engine/core/diagnostic.h"
#include "engine/core/ir.h"
#include "engine/json/json_source.h"

namespace shardproof::plan_detail {

struct InvalidPlan {
  Diagnostic diag;
};

// A JSON value together with the document and file it was read from. Its
// JSON pointer is worked out only when asked, which is for a diagnostic:
// plans hold millions of values and almost none of them is ever reported.
class Node {
 public:
  // The root of a document read from `file`: its pointer is "".
  Node(const jsonsrc::Value& document, const std::string& file)
      : v_(&document), doc_(&document), file_(&file) {}

  const jsonsrc::Value& value() const { return *v_; }
  const jsonsrc::Value* operator->() const { return v_; }
  const std::string& file() const { return *file_; }
  // Walks the document to find this value: for messages only.
  std::string pointer() const;

  Node item(size_t i) const { return child(v_->items.at(i)); }
  Node member(size_t i) const { return child(v_->items.at(i)); }  // an object's i-th member
  std::optional<Node> get(std::string_view key) const;

  [[noreturn]] void fail(std::string_view rule, const std::string& message) const;
  // At the i-th key of this object (unknown keys): the key itself is wrong.
  [[noreturn]] void fail_at_key(size_t i, std::string_view rule, const std::string& message) const;
  // A required key is absent: points where it should be, at this object.
  [[noreturn]] void fail_missing(std::string_view key, std::string_view rule,
                                 const std::string& what) const;

 private:
  Node(const jsonsrc::Value& value, const jsonsrc::Value& document, const std::string& file)
      : v_(&value), doc_(&document), file_(&file) {}
  Node child(const jsonsrc::Value& value) const { return Node(value, *doc_, *file_); }

  const jsonsrc::Value* v_;
  const jsonsrc::Value* doc_;
  const std::string* file_;
};

// A function that makes the text of a message.
template <class F>
concept MakesText = std::is_invocable_r_v<std::string, const F&>;

// The subject of a message ("tensor \"x\" shape[1]"), made only if the
// message is: a string, or a function that returns one. Nearly every check
// passes, and plans have ~10^5 tensors and ops. It refers to its text or
// function, so it lives as a parameter only.
class What {
 public:
  What(const char* text) : text_(text) {}
  What(const std::string& text) : text_(text) {}
  template <MakesText F>
  What(const F& make) : make_(&call<F>), fn_(&make) {}

  std::string str() const { return make_ ? make_(fn_) : std::string(text_); }

 private:
  template <class F>
  static std::string call(const void* fn) {
    return (*static_cast<const F*>(fn))();
  }

  std::string_view text_;
  std::string (*make_)(const void*) = nullptr;
  const void* fn_ = nullptr;
};

// `s` in double quotes, for messages.
std::string quoted(std::string_view s);

// Each fails with rule "type" unless told, saying what was expected and found.
void expect_object(const Node& n, What what);
void expect_array(const Node& n, What what, std::string_view rule = "type");
const std::string& expect_string(const Node& n, What what, std::string_view rule = "type");
// An integer in [lo, hi] (integer-valued JSON numbers only, exactly).
int64_t expect_int(const Node& n, std::string_view rule, What what, int64_t lo, int64_t hi);
// Rejects any key of `obj` not in `allowed` (rule "unknown-key").
void check_keys(const Node& obj, std::initializer_list<std::string_view> allowed, What what);
Node require(const Node& obj, std::string_view key, What what,
             std::string_view rule = "missing-key");

// An op's "src" ({"file", "line", "function"}: where a captured program
// made it; rule "src"). Ops of one line share one SourceRef: `seen` interns
// them for the graph being read.
using SourceInterner = std::unordered_map<std::string, std::shared_ptr<const SourceRef>>;
std::shared_ptr<const SourceRef> read_source(const Node& n, What what, SourceInterner& seen);

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

// "the parallel graph" or "the logical graph", for messages.
const char* graph_name(const Graph& g);

// The checks read_graph makes once a graph is read
// (plan_validation_graph_checks.cpp). Every tensor is a graph input or the
// out of exactly one op, never both: fills g.producer.
void check_ssa(Graph& g, const GraphSyntax& syn);
// A non-collective op runs on one rank, all its tensors there: sets op.rank.
void place_local(const Graph& g, Op& op, const Node& n);
// A collective's i-th input and output live on group[i]; send moves
// group[0] -> group[1].
void place_collective(const Graph& g, const Op& op, const Node& n);
// Kahn's algorithm, always taking the ready op that comes first in the
// plan: fills g.topo_order and g.topo_rank; a cycle fails (rule "cycle").
void sort_topologically(Graph& g, const GraphSyntax& syn);

// What check_lineage checks: the whole contract (Plan), or, for a part of
// an expansion the class verifier cut out around some stages (Stages), each
// claim alone: its inputs may claim intermediate logical tensors (they are
// stage inputs), and coverage and part sets are checked over the whole mesh
// elsewhere (compact_rules.h).
enum class LineageScope { Plan, Stages };
// Lineage rules of a parallel graph against the logical one: fills each
// TensorDecl::of.
void check_lineage(const Graph& logical, const GraphSyntax& logical_syntax, Graph& parallel,
                   const GraphSyntax& parallel_syntax, LineageScope scope = LineageScope::Plan);

// One map fn used with two arities anywhere in the plan is invalid.
void check_map_arity(const std::vector<std::pair<const Graph*, const GraphSyntax*>>& graphs);

// The first map op (graph and op index) whose fn was used before with
// another arity, and that first use.
struct MapArityConflict {
  size_t graph;
  int op;
  size_t first_graph;
  int first_op;
};
std::optional<MapArityConflict> find_map_arity_conflict(const std::vector<const Graph*>& graphs);

// Op `index` of graph `g` (read before) read again from `n`, its edited
// element parsed alone, with every rule that concerns one op: fields,
// operator, tensor references, attributes, placement, shape rule. The
// graph is not changed. Throws InvalidPlan whose position may be unusable:
// the caller reads the whole plan to word the error.
Op reread_op(const Node& n, Graph& g, int index);

// "h[0:8, 4:8]" (+ " part 1 of 2").
std::string claim_text(const Lineage& lin);

}  // namespace shardproof::plan_detail
