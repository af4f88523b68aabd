// Reads one graph of a plan and checks the rules that concern it alone:
// structure, SSA, placement on ranks, acyclicity, operator shape rules.
#include <algorithm>
#include <charconv>
#include <exception>
#include <limits>
#include <queue>
#include <set>
#include <unordered_map>

#include "engine/core/did_you_mean.h"
#include "engine/format/v1/plan_validation.h"
#include "engine/ops/op_registry.h"

namespace shardproof::plan_detail {
namespace {

using Kind = jsonsrc::Value::Kind;

// Bigger shapes would overflow element counts elsewhere.
constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 4;
// Attribute numbers beyond this exponent are surely mistakes; their exact
// values would cost memory for nothing.
constexpr long kMaxExponent = 4096;

bool exponent_too_large(const std::string& text) {
  size_t e = text.find_first_of("eE");
  if (e == std::string::npos) return false;
  std::string digits = text.substr(e + 1);
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.erase(0, 1);
  return digits.size() > 6 || (!digits.empty() && std::stol(digits) > kMaxExponent);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Exact fractions written as strings, e.g. "1/3": the parser makes them
// numbers. The form is -?[0-9]+/[0-9]+, under 4096 characters.
bool is_fraction_text(const std::string& s) {
  if (s.size() >= 4096) return false;
  size_t i = s.rfind('/');
  if (i == std::string::npos) return false;
  std::string_view num(s.data(), i), den(s.data() + i + 1, s.size() - i - 1);
  if (!num.empty() && num[0] == '-') num.remove_prefix(1);
  return !num.empty() && !den.empty() && std::all_of(num.begin(), num.end(), is_digit) &&
         std::all_of(den.begin(), den.end(), is_digit);
}

Attr read_attr(const Node& n) {
  switch (n->kind) {
    case Kind::Number: {
      // Nearly every attribute number is a plain integer: no need for the
      // general parser (exponents, fractions) to make it exact.
      long v = 0;
      const char* end = n->text.data() + n->text.size();
      if (auto [ptr, ec] = std::from_chars(n->text.data(), end, v); ec == std::errc() && ptr == end)
        return Attr::of_number(Rational(v));
      std::optional<Rational> r;
      if (!exponent_too_large(n->text)) r = parse_exact_number(n->text);
      if (!r)
        n.fail("attr-value", "attribute number " + n->text + " is out of range (exponent beyond " +
                                 std::to_string(kMaxExponent) + ")");
      return Attr::of_number(*r);
    }
    case Kind::String: {
      if (!is_fraction_text(n->text)) return Attr::of_string(n->text);
      std::optional<Rational> r = parse_exact_number(n->text);
      if (!r)
        n.fail("attr-value", "attribute fraction " + quoted(n->text) + " has a zero denominator");
      return Attr::of_number(*r);
    }
    case Kind::Bool:
      return Attr::of_bool(n->boolean);
    case Kind::Array: {
      std::vector<Attr> items;
      items.reserve(n->items.size());
      for (size_t i = 0; i < n->items.size(); ++i) items.push_back(read_attr(n.item(i)));
      return Attr::of_list(std::move(items));
    }
    default:
      n.fail("attr-value", "an attribute value must be a number, string, boolean or list; found " +
                               jsonsrc::describe(n.value()));
  }
}

class GraphReader {
 public:
  GraphReader(const Node& node, bool parallel, Graph& g)
      : node_(node), g_(g), graph_pointer_(node.pointer()) {
    g_.parallel = parallel;
    g_.source_file = node.file();
    syn_.root = node;
  }

  // For reread(): `g` is a graph read before; `op_node` an op element alone.
  struct Rereading {};
  GraphReader(const Node& op_node, Graph& g, Rereading) : node_(op_node), g_(g), rereading_(true) {}

  // Op `index` read again from its (edited) element, with every rule that
  // concerns one op: fields, operator, tensor references, attributes,
  // placement and the shape rule. The graph is left as it was.
  Op reread(int index) {
    Op op = read_op(node_, index, g_.ops.at(static_cast<size_t>(index)).pointer);
    if (g_.parallel) {
      if (op.group.empty())
        place_local(g_, op, node_);
      else
        place_collective(g_, op, node_);
    }
    check_op_shapes(op, node_, defs_.back());
    return op;
  }

  GraphSyntax run() {
    read_top();
    read_tensors();
    g_.inputs = read_names(*syn_.inputs, "inputs");
    g_.outputs = read_names(*syn_.outputs, "outputs");
    check_outputs();
    read_ops();
    check_ssa(g_, syn_);
    if (g_.parallel) check_placement();
    sort_topologically(g_, syn_);
    check_shapes();
    return std::move(syn_);
  }

 private:
  const char* graph_name() const { return plan_detail::graph_name(g_); }

  void read_top() {
    expect_object(node_, graph_name());
    check_keys(node_, {"world", "tensors", "inputs", "ops", "outputs"}, graph_name());
    std::optional<Node> world = node_.get("world");
    if (g_.parallel) {
      if (!world) node_.fail_missing("world", "world", graph_name());
      g_.world = static_cast<int>(expect_int(*world, "world", "world", 1, 1 << 20));
    } else if (world) {
      world->fail("world",
                  "\"world\" belongs to the parallel graph only; the logical graph "
                  "runs on one device");
    }
    syn_.inputs = require(node_, "inputs", graph_name());
    syn_.outputs = require(node_, "outputs", graph_name());
  }

  void read_tensors() {
    Node tensors = require(node_, "tensors", graph_name());
    expect_object(tensors, "tensors");
    const std::string base = graph_pointer_ + "/tensors/";
    size_t count = tensors->items.size();
    g_.tensors.reserve(count);
    g_.tensor_index.reserve(count);
    syn_.tensor_decls.reserve(count);
    syn_.of_nodes.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const std::string& name = tensors->keys[i].name;
      g_.tensor_index[name] = static_cast<int>(i);
      g_.tensors.push_back(
          read_tensor(tensors.member(i), name, base + jsonsrc::pointer_token(name)));
    }
  }

  TensorDecl read_tensor(const Node& n, const std::string& name, std::string pointer) {
    auto what = [&] { return "tensor " + quoted(name); };
    expect_object(n, what);
    check_keys(n, {"shape", "dtype", "rank", "of"}, what);
    TensorDecl t;
    t.name = name;
    t.pointer = std::move(pointer);
    t.shape = read_shape(require(n, "shape", what, "shape"), what);
    Node dtype = require(n, "dtype", what, "dtype");
    std::optional<DType> dt = parse_dtype(expect_string(
        dtype, [&] { return what() + " dtype"; }, "dtype"));
    if (!dt)
      dtype.fail("dtype", what() +
                              ": dtype must be one of f32, f16, bf16, f64, i32, i64, bool; found " +
                              jsonsrc::describe(dtype.value()));
    t.dtype = *dt;
    read_placement(n, what, t);
    syn_.tensor_decls.push_back(n);
    syn_.of_nodes.push_back(n.get("of"));
    return t;
  }

  void read_placement(const Node& n, What what, TensorDecl& t) {
    std::optional<Node> rank = n.get("rank");
    std::optional<Node> of = n.get("of");
    if (!g_.parallel) {
      if (rank) rank->fail("rank", what.str() + ": logical tensors have no rank");
      if (of)
        of->fail("lineage", what.str() + ": lineage (\"of\") belongs to parallel tensors only");
      return;
    }
    if (!rank) n.fail_missing("rank", "rank", "parallel " + what.str());
    t.rank = static_cast<int>(expect_int(
        *rank, "rank", [&] { return what.str() + " rank"; }, 0, g_.world - 1));
  }

  Shape read_shape(const Node& n, What what) {
    expect_array(
        n, [&] { return what.str() + " shape"; }, "shape");
    Shape shape;
    shape.reserve(n->items.size());
    int64_t elements = 1;
    for (size_t i = 0; i < n->items.size(); ++i) {
      int64_t d = expect_int(
          n.item(i), "shape", [&] { return what.str() + " shape[" + std::to_string(i) + "]"; }, 0,
          std::numeric_limits<int64_t>::max());
      if (d > 0 && elements > kMaxElements / d)
        n.fail("shape",
               what.str() + ": shape has more than " + std::to_string(kMaxElements) + " elements");
      elements *= d > 0 ? d : 1;
      shape.push_back(d);
    }
    return shape;
  }

  int tensor_ref(const Node& n, What what) {
    const std::string& name = expect_string(n, what);
    int t = g_.find(name);
    if (t < 0)
      n.fail("undeclared-tensor", what.str() + ": tensor " + quoted(name) + " is not declared in " +
                                      graph_name() + "'s \"tensors\"");
    return t;
  }

  std::vector<int> read_names(const Node& list, What what) {
    expect_array(list, what);
    std::vector<int> out;
    out.reserve(list->items.size());
    for (size_t i = 0; i < list->items.size(); ++i) out.push_back(tensor_ref(list.item(i), what));
    return out;
  }

  void check_outputs() {
    if (!g_.parallel && g_.outputs.empty())
      syn_.outputs->fail("outputs", "the logical graph must have at least one output");
    std::set<int> seen;
    for (size_t i = 0; i < g_.outputs.size(); ++i)
      if (!seen.insert(g_.outputs[i]).second)
        syn_.outputs->item(i).fail("outputs", "tensor " + quoted(g_.tensors[g_.outputs[i]].name) +
                                                  " is listed twice in outputs");
  }

  void read_ops() {
    Node ops = require(node_, "ops", graph_name());
    expect_array(ops, "ops");
    const std::string base = graph_pointer_ + "/ops/";
    size_t count = ops->items.size();
    // Reserved in full, so g_.ops never moves and the names' views stay valid.
    g_.ops.reserve(count);
    syn_.ops.reserve(count);
    std::unordered_map<std::string_view, int> names;
    names.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      Node n = ops.item(i);
      g_.ops.push_back(read_op(n, static_cast<int>(i), base + std::to_string(i)));
      syn_.ops.push_back(n);
      const std::string& name = g_.ops.back().name;
      if (name.empty()) continue;
      auto [it, fresh] = names.emplace(name, static_cast<int>(i));
      if (!fresh)
        n.get("name")->fail("op-name", "op name " + quoted(name) + " is already used by op " +
                                           std::to_string(it->second));
    }
  }

  Op read_op(const Node& n, int index, std::string pointer) {
    Op op;
    // Until its name is read, an op is known by its index.
    auto what = [&] {
      return op.name.empty() ? "op " + std::to_string(index) : "op " + quoted(op.name);
    };
    expect_object(n, what);
    check_keys(n, {"name", "op", "in", "out", "attrs", "group", "rank", "src"}, what);
    op.index = index;
    op.pointer = std::move(pointer);
    if (std::optional<Node> name = n.get("name")) {
      op.name = expect_string(
          *name, [&] { return what() + " name"; }, "op-name");
      if (op.name.empty()) name->fail("op-name", what() + ": an op name, when given, is not empty");
    }
    Node kind = require(n, "op", what);
    op.op = expect_string(kind, [&] { return what() + " \"op\""; });
    const OpDef* def = OpRegistry::instance().find(op.op);
    defs_.push_back(def);
    if (!def)
      kind.fail("unknown-op", what() + ": unknown operator " + quoted(op.op) +
                                  did_you_mean(op.op, OpRegistry::instance().names()));
    if (def->collective() && !g_.parallel)
      kind.fail("collective-in-logical", what() + ": " + op.op +
                                             " is a collective; collectives belong to the "
                                             "parallel graph only");
    op.in = read_names(require(n, "in", what), [&] { return what() + " in"; });
    Node out = require(n, "out", what);
    op.out = read_names(out, [&] { return what() + " out"; });
    if (op.out.empty()) out.fail("ssa", what() + ": an op must produce at least one tensor");
    if (std::optional<Node> attrs = n.get("attrs")) {
      expect_object(*attrs, [&] { return what() + " attrs"; });
      for (size_t i = 0; i < attrs->value().items.size(); ++i)
        op.attrs.emplace(attrs->value().keys[i].name, read_attr(attrs->member(i)));
    }
    read_op_placement(n, what, def->collective(), op);
    if (std::optional<Node> src = n.get("src")) op.src = read_source(*src, what, sources_);
    return op;
  }

  void read_op_placement(const Node& n, What what, bool collective, Op& op) {
    std::optional<Node> group = n.get("group");
    std::optional<Node> rank = n.get("rank");
    if (!g_.parallel) {
      if (group) group->fail("group", what.str() + ": the logical graph has no ranks, so no group");
      if (rank) rank->fail("rank", what.str() + ": the logical graph has no ranks");
      return;
    }
    if (collective) {
      if (!group) n.fail_missing("group", "group", "collective " + what.str());
      if (rank)
        rank->fail("group", what.str() + ": a collective runs on its group; it takes no \"rank\"");
      op.group = read_group(*group, what);
    } else {
      if (group)
        group->fail("group",
                    what.str() + ": only collectives have a group; " + op.op + " is not one");
      if (rank)
        op.rank = static_cast<int>(expect_int(
            *rank, "rank", [&] { return what.str() + " rank"; }, 0, g_.world - 1));
    }
  }

  std::vector<int> read_group(const Node& n, What what) {
    expect_array(
        n, [&] { return what.str() + " group"; }, "group");
    if (n->items.empty()) n.fail("group", what.str() + ": a group needs at least one rank");
    std::vector<int> group;
    group.reserve(n->items.size());
    for (size_t i = 0; i < n->items.size(); ++i) {
      Node item = n.item(i);
      int r = static_cast<int>(expect_int(
          item, "group", [&] { return what.str() + " group[" + std::to_string(i) + "]"; }, 0,
          g_.world - 1));
      if (std::find(group.begin(), group.end(), r) != group.end())
        item.fail("group",
                  what.str() + ": rank " + std::to_string(r) + " appears twice in the group");
      group.push_back(r);
    }
    return group;
  }

  void check_placement() {
    for (Op& op : g_.ops) {
      if (op.group.empty())
        place_local(g_, op, syn_.ops[op.index]);
      else
        place_collective(g_, op, syn_.ops[op.index]);
    }
  }

  void check_shapes() {
    for (const Op& op : g_.ops) check_op_shapes(op, syn_.ops[op.index], defs_[op.index]);
  }

  void check_op_shapes(const Op& op, const Node& n, const OpDef* def) {
    // Reused from op to op: assigning a shape keeps the vector it replaces.
    std::vector<TensorInfo>& in = infer_inputs_;
    in.resize(op.in.size());
    for (size_t k = 0; k < op.in.size(); ++k) {
      in[k].shape = g_.tensors[op.in[k]].shape;
      in[k].dtype = g_.tensors[op.in[k]].dtype;
    }
    std::vector<TensorInfo> out;
    auto label = [&] { return op.name.empty() ? op.op : op.op + " " + quoted(op.name); };
    std::string err;
    try {
      err = def->infer(op.attrs, in, op.out.size(), out);
    } catch (const std::exception& e) {
      err = std::string("internal error in the shape rule: ") + e.what();
    }
    if (!err.empty()) n.fail("op-infer", label() + ": " + err);
    if (out.size() != op.out.size())
      n.fail("op-infer", label() + ": the operator gives " + std::to_string(out.size()) +
                             " output(s); the plan lists " + std::to_string(op.out.size()));
    if (std::string e = def->take_declared_dtypes(op.attrs, declared_outputs(op), out); !e.empty())
      n.fail("op-infer", label() + ": " + e);
    for (size_t j = 0; j < out.size(); ++j) check_output(op, label, j, out[j]);
  }

  const std::vector<TensorInfo>& declared_outputs(const Op& op) {
    std::vector<TensorInfo>& declared = declared_outputs_;
    declared.resize(op.out.size());
    for (size_t j = 0; j < op.out.size(); ++j) {
      declared[j].shape = g_.tensors[op.out[j]].shape;
      declared[j].dtype = g_.tensors[op.out[j]].dtype;
    }
    return declared;
  }

  void check_output(const Op& op, What label, size_t j, const TensorInfo& got) {
    const TensorDecl& t = g_.tensors[op.out[j]];
    // A reread has no declarations to point at; its caller reads in full.
    if (rereading_ && (t.shape != got.shape || dclass_of(t.dtype) != dclass_of(got.dtype)))
      throw InvalidPlan{Diagnostic{"op-shape", "", "", 0, 0, "an edited op's output changed"}};
    const Node& decl = syn_.tensor_decls[op.out[j]];
    if (t.shape != got.shape)
      decl.get("shape")->fail("op-shape", "tensor " + quoted(t.name) + " is declared with shape " +
                                              shape_to_string(t.shape) + " but " + label.str() +
                                              " gives output " + std::to_string(j) + " shape " +
                                              shape_to_string(got.shape));
    if (dclass_of(t.dtype) != dclass_of(got.dtype))
      decl.get("dtype")->fail("op-dtype", "tensor " + quoted(t.name) + " is declared " +
                                              dtype_name(t.dtype) + " (" +
                                              dclass_name(dclass_of(t.dtype)) + ") but " +
                                              label.str() + " gives output " + std::to_string(j) +
                                              " a " + dclass_name(dclass_of(got.dtype)) +
                                              " dtype (" + dtype_name(got.dtype) + ")");
  }

  const Node& node_;
  Graph& g_;
  // Ops and tensors keep their pointers (Op::pointer, TensorDecl::pointer);
  // they are made from the graph's, found once.
  const std::string graph_pointer_;
  GraphSyntax syn_;
  std::vector<const OpDef*> defs_;            // per op, from read_op
  std::vector<TensorInfo> infer_inputs_;      // check_op_shapes' scratch
  std::vector<TensorInfo> declared_outputs_;  // declared_outputs' scratch
  SourceInterner sources_;                    // ops' "src", one per line
  const bool rereading_ = false;
};

}  // namespace

GraphSyntax read_graph(const Node& node, bool parallel, Graph& g) {
  return GraphReader(node, parallel, g).run();
}

Op reread_op(const Node& n, Graph& g, int index) {
  return GraphReader(n, g, GraphReader::Rereading{}).reread(index);
}

std::optional<MapArityConflict> find_map_arity_conflict(const std::vector<const Graph*>& graphs) {
  struct FirstUse {
    size_t arity, graph;
    int op;
  };
  std::unordered_map<std::string_view, FirstUse> seen;  // fn names live in the graphs' attrs
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    for (const Op& op : graphs[gi]->ops) {
      if (op.op != "map") continue;
      auto fn = op.attrs.find("fn");
      if (fn == op.attrs.end() || fn->second.kind != Attr::Kind::String) continue;
      auto [it, fresh] = seen.try_emplace(fn->second.text, FirstUse{op.in.size(), gi, op.index});
      if (!fresh && it->second.arity != op.in.size())
        return MapArityConflict{gi, op.index, it->second.graph, it->second.op};
    }
  }
  return std::nullopt;
}

void check_map_arity(const std::vector<std::pair<const Graph*, const GraphSyntax*>>& graphs) {
  std::vector<const Graph*> plain;
  for (auto [g, syn] : graphs) plain.push_back(g);
  std::optional<MapArityConflict> c = find_map_arity_conflict(plain);
  if (!c) return;
  const Op& op = graphs[c->graph].first->ops[c->op];
  const Op& first = graphs[c->first_graph].first->ops[c->first_op];
  const Node& n = graphs[c->graph].second->ops[c->op];
  const Node& first_node = graphs[c->first_graph].second->ops[c->first_op];
  const std::string where = first_node.file() + ":" + std::to_string(first_node->pos.line) + ":" +
                            std::to_string(first_node->pos.column) + " (" + first_node.pointer() +
                            ")";
  const std::string& fn = op.attrs.at("fn").text;
  n.get("attrs")->get("fn")->fail(
      "map-arity", "map fn " + quoted(fn) + " is used here with " + std::to_string(op.in.size()) +
                       " input(s) but with " + std::to_string(first.in.size()) + " at " + where +
                       "; one fn is one function with one arity");
}

}  // namespace shardproof::plan_detail
