// Reads a compact parallel graph (shardproof-plan/1.1): the mesh, the
// programs and their templates, with the rules of the compact form itself.
// Shapes, dtypes and attributes are kept as JSON text: they are the same at
// every instance, and the v1 rules check them on the expansion.
#include <algorithm>

#include "engine/format/compact/compact_graph.h"
#include "engine/ops/op_registry.h"

namespace shardproof::compact {
namespace {

using plan_detail::Node;
using Kind = jsonsrc::Value::Kind;

constexpr int64_t kMaxWorld = int64_t{1} << 20;

std::string quoted(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

class Reader {
 public:
  explicit Reader(CompactGraph& g) : g_(g) {}

  void read(const Node& parallel) {
    plan_detail::expect_object(parallel, "the parallel graph");
    plan_detail::check_keys(parallel, {"mesh", "programs"}, "the compact parallel graph");
    read_mesh(plan_detail::require(parallel, "mesh", "the compact parallel graph", "mesh"));
    Node programs = plan_detail::require(parallel, "programs", "the compact parallel graph");
    plan_detail::expect_array(programs, "programs");
    for (size_t i = 0; i < programs->items.size(); ++i) read_program(programs.item(i), i);
  }

 private:
  void read_mesh(const Node& n) {
    Mesh& m = g_.mesh;
    if (!n->is(Kind::Object))
      n.fail("mesh", "mesh: expected an object, found " + jsonsrc::describe(n.value()));
    plan_detail::check_keys(n, {"axes", "mb"}, "the mesh");
    Node axes = plan_detail::require(n, "axes", "the mesh", "mesh");
    plan_detail::expect_array(axes, "mesh axes", "mesh");
    for (size_t i = 0; i < axes->items.size(); ++i) {
      Node pair = axes.item(i);
      if (!pair->is(Kind::Array) || pair->items.size() != 2 || !pair->items[0].is(Kind::String))
        pair.fail("mesh", "mesh axes[" + std::to_string(i) +
                              "]: expected [name, size], e.g. [\"tp\", 8]; found " +
                              jsonsrc::describe(pair.value()));
      const std::string& name = pair->items[0].text;
      std::optional<int> axis = axis_by_name(name);
      if (!axis || *axis == kMbAxis)
        pair.item(0).fail("mesh", "mesh axis " + quoted(name) +
                                      ": a device axis is one of dp, pp, tp, cp, ep, etp (the "
                                      "micro-batch count is the mesh's \"mb\")");
      if (m.declared & (1u << *axis))
        pair.item(0).fail("mesh", "mesh axis " + quoted(name) + " is declared twice");
      int64_t size = plan_detail::expect_int(
          pair.item(1), "mesh", [&] { return "mesh axis " + quoted(name) + " size"; }, 1,
          kMaxWorld);
      if (m.world * size > kMaxWorld)
        pair.item(1).fail("mesh", "the mesh has more than 2^20 devices");
      m.axes.push_back(*axis);
      m.sizes.push_back(size);
      m.world *= size;
      m.declared |= 1u << *axis;
    }
    m.stride.assign(m.axes.size(), 1);
    for (size_t i = m.axes.size(); i-- > 1;) m.stride[i - 1] = m.stride[i] * m.sizes[i];
    if (std::optional<Node> mb = n.get("mb"))
      m.mb = plan_detail::expect_int(*mb, "mesh", "mesh mb", 1, kMaxWorld);
    m.declared |= 1u << kMbAxis;
  }

  // Runs `parse` on a string; an ExprError becomes a located failure.
  template <class F>
  auto parsed(const Node& n, const std::string& what, F parse) {
    try {
      return parse(expect_text(n, what));
    } catch (const ExprError& e) {
      n.fail(e.rule, what + ": " + e.message);
    }
  }

  const std::string& expect_text(const Node& n, const std::string& what) {
    if (!n->is(Kind::String))
      n.fail("compact-expr", what + ": expected a string, found " + jsonsrc::describe(n.value()));
    return n->text;
  }

  Template templ(const Node& n, const std::string& what) {
    return parsed(n, what,
                  [&](const std::string& s) { return parse_template(s, g_.mesh.declared); });
  }
  Condition cond(const Node& n, const std::string& what) {
    return parsed(n, what,
                  [&](const std::string& s) { return parse_condition(s, g_.mesh.declared); });
  }
  // An expression: a JSON integer or a string.
  Affine expr(const Node& n, const std::string& what) {
    if (n->is(Kind::Number)) {
      Affine a;
      a.constant = plan_detail::expect_int(n, "compact-expr", what, -kMaxMagnitude, kMaxMagnitude);
      return a;
    }
    return parsed(n, what, [&](const std::string& s) { return parse_affine(s, g_.mesh.declared); });
  }
  std::vector<Template> templates(const Node& list, const std::string& what) {
    plan_detail::expect_array(list, what);
    std::vector<Template> out;
    for (size_t i = 0; i < list->items.size(); ++i)
      out.push_back(templ(list.item(i), what + "[" + std::to_string(i) + "]"));
    return out;
  }
  bool flag(const Node& n, const std::string& key) {
    std::optional<Node> f = n.get(key);
    if (!f) return false;
    if (!f->value().is(Kind::Bool))
      f->fail("type", key + ": expected a boolean, found " + jsonsrc::describe(f->value()));
    return f->value().boolean;
  }

  void read_program(const Node& n, size_t index) {
    std::string what = "program " + std::to_string(index);
    plan_detail::expect_object(n, what);
    plan_detail::check_keys(n, {"name", "on", "tensors", "ops"}, what);
    Program p(n);
    if (std::optional<Node> name = n.get("name"))
      p.name = plan_detail::expect_string(*name, what + " name");
    if (!p.name.empty()) what = "program " + quoted(p.name);
    if (std::optional<Node> on = n.get("on")) p.on = cond(*on, what + " on");
    Node tensors = plan_detail::require(n, "tensors", what);
    plan_detail::expect_array(tensors, what + " tensors");
    for (size_t i = 0; i < tensors->items.size(); ++i)
      p.tensors.push_back(read_tensor(tensors.item(i), p.on.mask()));
    Node ops = plan_detail::require(n, "ops", what);
    plan_detail::expect_array(ops, what + " ops");
    for (size_t i = 0; i < ops->items.size(); ++i)
      p.ops.push_back(read_op(ops.item(i), i, p.on.mask()));
    g_.programs.push_back(std::move(p));
  }

  TensorTemplate read_tensor(const Node& n, AxisMask on_mask) {
    std::string what = "tensor template";
    plan_detail::expect_object(n, what);
    plan_detail::check_keys(n, {"name", "shape", "dtype", "of", "when", "input", "output"}, what);
    TensorTemplate t(n);
    Node name = plan_detail::require(n, "name", what);
    t.name = templ(name, what + " name");
    what = "tensor " + quoted(name->text);
    t.shape_json = jsonsrc::serialize(plan_detail::require(n, "shape", what, "shape").value());
    t.dtype_json = jsonsrc::serialize(plan_detail::require(n, "dtype", what, "dtype").value());
    AxisMask mask = on_mask | t.name.mask();
    if (std::optional<Node> of = n.get("of")) {
      t.of = read_lineage(*of, what);
      mask |= t.of->mask();
    }
    if (std::optional<Node> when = n.get("when")) {
      t.when = cond(*when, what + " when");
      mask |= t.when.mask();
    }
    t.input = flag(n, "input");
    t.output = flag(n, "output");
    t.per_mb = mask & (1u << kMbAxis);
    return t;
  }

  // [[lo, hi], ...] of affine expressions.
  std::vector<std::pair<Affine, Affine>> ranges(const Node& n, const std::string& what,
                                                const char* rule) {
    plan_detail::expect_array(n, what, rule);
    std::vector<std::pair<Affine, Affine>> out;
    for (size_t d = 0; d < n.value().items.size(); ++d) {
      Node range = n.item(d);
      if (!range->is(Kind::Array) || range->items.size() != 2)
        range.fail(rule, what + "[" + std::to_string(d) + "]: expected [lo, hi], found " +
                             jsonsrc::describe(range.value()));
      std::string at = what + "[" + std::to_string(d) + "]";
      out.emplace_back(expr(range.item(0), at), expr(range.item(1), at));
    }
    return out;
  }

  // [[lo, hi] or [lo, hi, step, count], ...] of affine expressions.
  std::vector<OverTemplate> over_ranges(const Node& n, const std::string& what) {
    plan_detail::expect_array(n, what, "lineage-over");
    std::vector<OverTemplate> out;
    for (size_t a = 0; a < n.value().items.size(); ++a) {
      Node range = n.item(a);
      if (!range->is(Kind::Array) || (range->items.size() != 2 && range->items.size() != 4))
        range.fail("lineage-over", what + "[" + std::to_string(a) +
                                       "]: expected [lo, hi] or [lo, hi, step, count], found " +
                                       jsonsrc::describe(range.value()));
      std::string at = what + "[" + std::to_string(a) + "]";
      OverTemplate o;
      o.lo = expr(range.item(0), at);
      o.hi = expr(range.item(1), at);
      o.strided = range->items.size() == 4;
      if (o.strided) {
        o.step = expr(range.item(2), at);
        o.count = expr(range.item(3), at);
      }
      out.push_back(std::move(o));
    }
    return out;
  }

  Lineage read_lineage(const Node& n, const std::string& what) {
    if (!n->is(Kind::Object))
      n.fail("lineage", what + " of: expected an object, found " + jsonsrc::describe(n.value()));
    plan_detail::check_keys(n, {"tensor", "slice", "part", "over"}, what + " of");
    Lineage lin;
    lin.tensor =
        templ(plan_detail::require(n, "tensor", what + " of", "lineage"), what + " of.tensor");
    if (std::optional<Node> slice = n.get("slice")) {
      lin.has_slice = true;
      lin.slice = ranges(*slice, what + " of.slice", "lineage-slice");
    }
    if (std::optional<Node> over = n.get("over")) lin.over = over_ranges(*over, what + " of.over");
    if (std::optional<Node> part = n.get("part")) {
      lin.has_part = true;
      if (!part->value().is(Kind::Array) || part->value().items.size() != 2)
        part->fail("lineage-part",
                   what + " of.part: expected [k, n], found " + jsonsrc::describe(part->value()));
      lin.part_k = expr(part->item(0), what + " of.part[0]");
      lin.part_n = expr(part->item(1), what + " of.part[1]");
    }
    return lin;
  }

  OpTemplate read_op(const Node& n, size_t index, AxisMask on_mask) {
    std::string what = "op template " + std::to_string(index);
    plan_detail::expect_object(n, what);
    plan_detail::check_keys(n, {"name", "op", "in", "out", "attrs", "when", "group", "to"}, what);
    OpTemplate t(n);
    AxisMask mask = on_mask;
    if (std::optional<Node> name = n.get("name")) {
      t.name = templ(*name, what + " name");
      what = "op " + quoted(name->value().text);
      mask |= t.name->mask();
    }
    Node kind = plan_detail::require(n, "op", what);
    t.op = plan_detail::expect_string(kind, what + " \"op\"");
    const OpDef* def = OpRegistry::instance().find(t.op);
    // An unknown op stays local; the v1 rules name it on the expansion.
    if (def && def->collective())
      t.kind = t.op == "send" ? OpTemplate::Kind::Send : OpTemplate::Kind::Collective;
    Node in = plan_detail::require(n, "in", what), out = plan_detail::require(n, "out", what);
    t.in = templates(in, what + " in");
    t.out = templates(out, what + " out");
    for (const Template& x : t.in) mask |= x.mask();
    for (const Template& x : t.out) mask |= x.mask();
    if (std::optional<Node> attrs = n.get("attrs")) read_attrs(*attrs, what, t);
    for (const AttrTemplate& a : t.attrs) mask |= a.mask();
    if (std::optional<Node> when = n.get("when")) {
      t.when = cond(*when, what + " when");
      mask |= t.when.mask();
    }
    t.per_mb = mask & (1u << kMbAxis);
    read_group(n, what, on_mask | t.when.mask(), t);
    read_send(n, what, t);
    return t;
  }

  // Attributes are copied as written (the v1 rules check them on the
  // expansion), except {"expr": E}, as the value or an item of a list: an
  // integer that depends on the instance.
  void read_attrs(const Node& attrs, const std::string& what, OpTemplate& t) {
    t.has_attrs = true;
    if (!attrs->is(Kind::Object)) {
      t.attrs.push_back({"", jsonsrc::serialize(attrs.value()), std::nullopt, {}, false});
      return;
    }
    for (size_t i = 0; i < attrs->items.size(); ++i) {
      Node v = attrs.member(i);
      AttrTemplate a{attrs->keys[i].name, "", std::nullopt, {}, false};
      const std::string at = what + " attrs." + a.key;
      bool has_expr = false;
      if (v->is(Kind::Array))
        for (const auto& item : v->items) has_expr = has_expr || item.is(Kind::Object);
      if (v->is(Kind::Object)) {
        a.expr = attr_expr(v, at);
      } else if (has_expr) {
        a.is_list = true;
        for (size_t k = 0; k < v->items.size(); ++k) {
          Node item = v.item(k);
          if (item->is(Kind::Object))
            a.items.emplace_back("", attr_expr(item, at + "[" + std::to_string(k) + "]"));
          else
            a.items.emplace_back(jsonsrc::serialize(item.value()), std::nullopt);
        }
      } else {
        a.value_json = jsonsrc::serialize(v.value());
      }
      t.attrs.push_back(std::move(a));
    }
  }

  Affine attr_expr(const Node& v, const std::string& at) {
    if (v->items.size() != 1 || v->keys[0].name != "expr")
      v.fail("compact-expr", at + ": an attribute object is {\"expr\": E}, an integer that "
                                  "depends on the instance");
    return expr(v.member(0), at + ".expr");
  }

  void read_group(const Node& n, const std::string& what, AxisMask fixed, OpTemplate& t) {
    std::optional<Node> group = n.get("group");
    if (t.kind != OpTemplate::Kind::Collective) {
      if (group)
        group->fail(t.kind == OpTemplate::Kind::Send ? "compact-send" : "compact-group",
                    what + ": only collectives other than send have a group; " + t.op +
                        (t.kind == OpTemplate::Kind::Send ? " moves by \"to\"" : " is not one"));
      return;
    }
    if (!group) n.fail_missing("group", "compact-group", "collective " + what);
    if (!group->value().is(Kind::Array))
      group->fail("compact-group", what + " group: expected a list of device axes, found " +
                                       jsonsrc::describe(group->value()));
    for (size_t i = 0; i < group->value().items.size(); ++i) {
      Node item = group->item(i);
      std::optional<int> axis =
          item->is(Kind::String) ? axis_by_name(item->text) : std::optional<int>();
      if (!axis || *axis == kMbAxis || !(g_.mesh.declared & (1u << *axis)))
        item.fail("compact-group", what + " group[" + std::to_string(i) +
                                       "]: expected a device axis of the mesh, found " +
                                       jsonsrc::describe(item.value()));
      if (std::find(t.group.begin(), t.group.end(), *axis) != t.group.end())
        item.fail("compact-group", what + ": axis " + item->text + " appears twice in the group");
      if (fixed & (1u << *axis))
        item.fail("compact-group",
                  what + ": the group varies along " + item->text +
                      ", but the program's \"on\" or the op's \"when\" restricts " + item->text +
                      ", so the group would not be a whole line of the mesh");
      t.group.push_back(*axis);
    }
    if (t.in.size() != 1 || t.out.size() != 1)
      n.fail("compact-group", what +
                                  ": a collective template has one \"in\" and one \"out\" (one "
                                  "member's); found " +
                                  std::to_string(t.in.size()) + " and " +
                                  std::to_string(t.out.size()));
  }

  void read_send(const Node& n, const std::string& what, OpTemplate& t) {
    std::optional<Node> to = n.get("to");
    if (t.kind != OpTemplate::Kind::Send) {
      if (to) to->fail("compact-send", what + ": only send has \"to\"");
      return;
    }
    if (!to) n.fail_missing("to", "compact-send", "send " + what);
    if (!to->value().is(Kind::Object))
      to->fail("compact-send", what +
                                   " to: expected an object of axis offsets, e.g. {\"pp\": 1}; "
                                   "found " +
                                   jsonsrc::describe(to->value()));
    for (size_t i = 0; i < to->value().keys.size(); ++i) {
      const std::string& name = to->value().keys[i].name;
      std::optional<int> axis = axis_by_name(name);
      if (!axis || *axis == kMbAxis || !(g_.mesh.declared & (1u << *axis)))
        to->fail_at_key(i, "compact-send",
                        what + " to: " + quoted(name) + " is not a device axis of the mesh");
      t.to[*axis] = plan_detail::expect_int(to->member(i), "compact-send", what + " to." + name,
                                            -kMaxWorld, kMaxWorld);
    }
    if (t.in.size() != 1 || t.out.size() != 1)
      n.fail("compact-send", what + ": a send has one \"in\" and one \"out\"; found " +
                                 std::to_string(t.in.size()) + " and " +
                                 std::to_string(t.out.size()));
  }

  CompactGraph& g_;
};

}  // namespace

int64_t Mesh::size(int axis) const {
  if (axis == kMbAxis) return mb;
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] == axis) return sizes[i];
  return 1;
}

Coord Mesh::coord(int64_t rank) const {
  Coord c{};
  for (size_t i = 0; i < axes.size(); ++i) {
    c[axes[i]] = rank / stride[i];
    rank %= stride[i];
  }
  return c;
}

std::string Mesh::describe(const Coord& c, bool with_mb) const {
  std::string s;
  for (int axis : axes)
    s += (s.empty() ? "" : " ") + std::string(kAxisNames[axis]) + "=" + std::to_string(c[axis]);
  if (with_mb) s += (s.empty() ? "" : " ") + std::string("mb=") + std::to_string(c[kMbAxis]);
  return s.empty() ? "the only device" : s;
}

CompactGraph read_compact(const plan_detail::Node& parallel) {
  CompactGraph g;
  Reader(g).read(parallel);
  return g;
}

}  // namespace shardproof::compact
