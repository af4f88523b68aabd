// Writes the v1 parallel graph a compact graph denotes, in the order the
// format fixes: programs, then templates, then instances (rank order, mb
// innermost). A first pass only counts, so a plan too large to expand is
// refused before any memory is spent on it.
#include <algorithm>
#include <charconv>

#include "engine/format/compact/compact_expand.h"

namespace shardproof::compact {
namespace {

using plan_detail::InvalidPlan;
using plan_detail::Node;

void append_int(std::string& out, int64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

void append_string(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
}

std::string where(const Node& n) {
  return n.file() + ":" + std::to_string(n->pos.line) + ":" + std::to_string(n->pos.column);
}

class Expander {
 public:
  Expander(const CompactGraph& g, Expansion& e, const Selection* selection = nullptr)
      : g_(g), m_(g.mesh), e_(e), sel_(selection) {}

  void count_only() { count(); }

  void run() {
    if (!sel_) count();
    e_.text.reserve(static_cast<size_t>(tensor_count_ * 160 + op_count_ * 200));
    e_.text += "{\"world\":";
    append_int(e_.text, m_.world);
    e_.text += ",\"tensors\":{";
    for (uint32_t p = 0; p < g_.programs.size(); ++p)
      for (uint32_t t = 0; t < g_.programs[p].tensors.size(); ++t) tensors(p, t);
    e_.text += "},\"inputs\":[";
    names(e_.inputs);
    e_.text += "],\"ops\":[";
    for (uint32_t p = 0; p < g_.programs.size(); ++p)
      for (uint32_t o = 0; o < g_.programs[p].ops.size(); ++o) ops(p, o);
    e_.text += "],\"outputs\":[";
    names(e_.outputs);
    e_.text += "]}";
  }

 private:
  // Calls f(coord, rank) for every instance of an element, in order.
  // With a selection, only its instances of element `e` (tensor or op),
  // in the same order.
  template <class F>
  void each(const Program& p, const Condition& when, bool per_mb, F f,
            const std::unordered_set<int64_t>* selected = nullptr) const {
    if (sel_) {
      std::vector<int64_t> keys(selected->begin(), selected->end());
      std::sort(keys.begin(), keys.end());
      for (int64_t key : keys) {
        Coord c = m_.coord(key / m_.mb);
        c[kMbAxis] = key % m_.mb;
        f(c, key / m_.mb);
      }
      return;
    }
    for (int64_t r = 0; r < m_.world; ++r) {
      Coord c = m_.coord(r);
      for (int64_t k = 0; k < (per_mb ? m_.mb : 1); ++k) {
        c[kMbAxis] = k;
        if (p.on.holds(c) && when.holds(c)) f(c, r);
      }
    }
  }

  bool leader(const OpTemplate& op, const Coord& c) const {
    for (int axis : op.group)
      if (c[axis] != 0) return false;
    return true;
  }

  [[noreturn]] void too_large(const Node& n, const char* what) const {
    const bool by_bytes = tensor_count_ <= kMaxInstances && op_count_ <= kMaxInstances;
    n.fail("plan-too-large",
           (by_bytes
                ? "the expansion would take more than " + std::to_string(kMaxExpansionBytes >> 20) +
                      " MiB at the " + what + " instances so far"
                : "the expansion has more than " + std::to_string(kMaxInstances) + " " + what +
                      " instances") +
               " (mesh of " + std::to_string(m_.world) + " devices, " + std::to_string(m_.mb) +
               " micro-batches); plans this large are verified per coordinate class, without "
               "expanding them (the default of shardproof verify)");
  }

  void count() {
    for (const Program& p : g_.programs) {
      for (const TensorTemplate& t : p.tensors)
        each(p, t.when, t.per_mb, [&](const Coord&, int64_t) {
          if (++tensor_count_ > kMaxInstances || over_budget()) too_large(t.node, "tensor");
        });
      for (const OpTemplate& op : p.ops)
        each(p, op.when, op.per_mb, [&](const Coord& c, int64_t) {
          if (op.kind == OpTemplate::Kind::Collective && !leader(op, c)) return;
          if (++op_count_ > kMaxInstances || over_budget()) too_large(op.node, "op");
        });
    }
  }

  bool over_budget() const {
    return tensor_count_ * kBytesPerTensorInstance + op_count_ * kBytesPerOpInstance >
           kMaxExpansionBytes;
  }

  Origin origin(uint32_t p, uint32_t element, const Coord& c) const {
    Origin o{p, element, {}};
    for (int a = 0; a < kAxisCount; ++a) o.c[a] = static_cast<int32_t>(c[a]);
    return o;
  }

  [[noreturn]] void collision(const Node& n, const char* kind, const std::string& name,
                              const Coord& c, bool per_mb, const Node& first,
                              const Origin& first_origin, bool first_per_mb) const {
    Coord fc{};
    for (int a = 0; a < kAxisCount; ++a) fc[a] = first_origin.c[a];
    n.fail("instance-collision",
           std::string(kind) + " name \"" + name + "\" at instance (" + m_.describe(c, per_mb) +
               ") is already given by the template at " + where(first) + " at instance (" +
               m_.describe(fc, first_per_mb) + "); every instance needs its own name");
  }

  void tensors(uint32_t p, uint32_t ti) {
    const TensorTemplate& t = g_.programs[p].tensors[ti];
    std::string name;
    each(
        g_.programs[p], t.when, t.per_mb,
        [&](const Coord& c, int64_t rank) {
          name.clear();
          t.name.append(c, name);
          auto index = static_cast<uint32_t>(e_.tensors.size());
          auto [it, fresh] = e_.tensor_index.emplace(name, index);
          if (!fresh) {
            const Origin& o = e_.tensors[it->second];
            const TensorTemplate& first = g_.programs[o.program].tensors[o.element];
            collision(*t.node.get("name"), "tensor", name, c, t.per_mb, first.node, o,
                      first.per_mb);
          }
          e_.tensors.push_back(origin(p, ti, c));
          // A selected tensor nothing selected writes is given: a stage input.
          if (t.input || (sel_ && !sel_->produced[p][ti].count(key_of(c))))
            e_.inputs.push_back(index);
          if (t.output && !sel_) e_.outputs.push_back(index);
          std::string& out = e_.text;
          if (index > 0) out += ',';
          append_string(out, name);
          out += ":{\"shape\":";
          out += t.shape_json;
          out += ",\"dtype\":";
          out += t.dtype_json;
          out += ",\"rank\":";
          append_int(out, rank);
          if (t.of) lineage(*t.of, c);
          out += '}';
        },
        sel_ ? &sel_->tensors[p][ti] : nullptr);
  }

  int64_t key_of(const Coord& c) const { return m_.pack(c); }

  void lineage(const Lineage& lin, const Coord& c) {
    std::string& out = e_.text;
    out += ",\"of\":{\"tensor\":";
    append_string(out, lin.tensor.eval(c));
    if (lin.has_slice) ranges(",\"slice\":[", lin.slice, c);
    if (lin.has_part) {
      out += ",\"part\":[";
      append_int(out, lin.part_k.eval(c));
      out += ',';
      append_int(out, lin.part_n.eval(c));
      out += ']';
    }
    if (!lin.over.empty()) {
      out += ",\"over\":[";
      for (size_t a = 0; a < lin.over.size(); ++a) {
        const OverTemplate& o = lin.over[a];
        out += a ? ",[" : "[";
        append_int(out, o.lo.eval(c));
        out += ',';
        append_int(out, o.hi.eval(c));
        if (o.strided) {
          out += ',';
          append_int(out, o.step.eval(c));
          out += ',';
          append_int(out, o.count.eval(c));
        }
        out += ']';
      }
      out += ']';
    }
    out += '}';
  }

  // `opening` then [[lo, hi], ...] at `c`, closed.
  void ranges(const char* opening, const std::vector<std::pair<Affine, Affine>>& list,
              const Coord& c) {
    std::string& out = e_.text;
    out += opening;
    for (size_t d = 0; d < list.size(); ++d) {
      out += d ? ",[" : "[";
      append_int(out, list[d].first.eval(c));
      out += ',';
      append_int(out, list[d].second.eval(c));
      out += ']';
    }
    out += ']';
  }

  void names(const std::vector<uint32_t>& list) {
    // The names are the tensor_index keys; find each once by its index.
    std::vector<const std::string*> by_index(e_.tensors.size(), nullptr);
    for (const auto& [name, index] : e_.tensor_index) by_index[index] = &name;
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) e_.text += ',';
      append_string(e_.text, *by_index[list[i]]);
    }
  }

  void ops(uint32_t p, uint32_t oi) {
    const OpTemplate& op = g_.programs[p].ops[oi];
    int64_t members = 1;
    for (int axis : op.group) members *= m_.size(axis);
    std::string name;
    each(
        g_.programs[p], op.when, op.per_mb,
        [&](const Coord& c, int64_t rank) {
          if (op.kind == OpTemplate::Kind::Collective && !leader(op, c)) return;
          Coord dst = c;
          if (op.kind == OpTemplate::Kind::Send) dst = destination(op, c);
          std::string& out = e_.text;
          if (!e_.ops.empty()) out += ',';
          e_.ops.push_back(origin(p, oi, c));
          out += '{';
          if (op.name) {
            name.clear();
            op.name->append(c, name);
            auto [it, fresh] = op_names_.emplace(name, static_cast<uint32_t>(e_.ops.size() - 1));
            if (!fresh) {
              const Origin& o = e_.ops[it->second];
              const OpTemplate& first = g_.programs[o.program].ops[o.element];
              collision(*op.node.get("name"), "op", name, c, op.per_mb, first.node, o,
                        first.per_mb);
            }
            out += "\"name\":";
            append_string(out, name);
            out += ',';
          }
          out += "\"op\":";
          append_string(out, op.op);
          if (op.kind == OpTemplate::Kind::Collective) {
            std::vector<Coord> group;
            for (int64_t j = 0; j < members; ++j) group.push_back(m_.member(op.group, c, j));
            out += ",\"in\":[";
            list(op.in[0], group);
            out += "],\"out\":[";
            list(op.out[0], group);
            out += "],\"group\":[";
            for (size_t j = 0; j < group.size(); ++j) {
              if (j) out += ',';
              append_int(out, m_.rank(group[j]));
            }
            out += ']';
          } else {
            out += ",\"in\":[";
            list(op.in, c);
            out += "],\"out\":[";
            list(op.out, dst);
            out += ']';
            if (op.kind == OpTemplate::Kind::Send) {
              out += ",\"group\":[";
              append_int(out, rank);
              out += ',';
              append_int(out, m_.rank(dst));
              out += ']';
            } else {
              out += ",\"rank\":";
              append_int(out, rank);
            }
          }
          if (op.has_attrs) attrs(op, c);
          out += '}';
        },
        sel_ ? &sel_->ops[p][oi] : nullptr);
  }

  void attrs(const OpTemplate& op, const Coord& c) {
    std::string& out = e_.text;
    out += ",\"attrs\":";
    // Not an object: written as it is, for the v1 rule to name.
    if (op.attrs.size() == 1 && op.attrs[0].key.empty() && !op.attrs[0].expr) {
      out += op.attrs[0].value_json;
      return;
    }
    out += '{';
    for (size_t i = 0; i < op.attrs.size(); ++i) {
      if (i) out += ',';
      append_string(out, op.attrs[i].key);
      out += ':';
      const AttrTemplate& a = op.attrs[i];
      if (a.expr) {
        append_int(out, a.expr->eval(c));
      } else if (a.is_list) {
        out += '[';
        for (size_t k = 0; k < a.items.size(); ++k) {
          if (k) out += ',';
          if (a.items[k].second)
            append_int(out, a.items[k].second->eval(c));
          else
            out += a.items[k].first;
        }
        out += ']';
      } else {
        out += a.value_json;
      }
    }
    out += '}';
  }

  Coord destination(const OpTemplate& op, const Coord& c) const {
    Coord dst = c;
    for (int axis : m_.axes) {
      dst[axis] += op.to[axis];
      if (dst[axis] < 0 || dst[axis] >= m_.size(axis))
        op.node.get("to")->fail("send-off-mesh",
                                "send at instance (" + m_.describe(c, op.per_mb) + ") goes to " +
                                    kAxisNames[axis].data() + "=" + std::to_string(dst[axis]) +
                                    ", outside the mesh (0 <= " + kAxisNames[axis].data() + " < " +
                                    std::to_string(m_.size(axis)) +
                                    "); limit the op with \"when\" or its program with \"on\"");
    }
    return dst;
  }

  void list(const std::vector<Template>& ts, const Coord& c) {
    for (size_t i = 0; i < ts.size(); ++i) {
      if (i) e_.text += ',';
      append_string(e_.text, ts[i].eval(c));
    }
  }
  void list(const Template& t, const std::vector<Coord>& cs) {
    for (size_t i = 0; i < cs.size(); ++i) {
      if (i) e_.text += ',';
      append_string(e_.text, t.eval(cs[i]));
    }
  }

  const CompactGraph& g_;
  const Mesh& m_;
  Expansion& e_;
  const Selection* sel_;
  int64_t tensor_count_ = 0, op_count_ = 0;
  std::unordered_map<std::string, uint32_t> op_names_;
};

}  // namespace

Expansion expand(const CompactGraph& g) {
  Expansion e;
  Expander(g, e).run();
  return e;
}

Expansion expand_selected(const CompactGraph& g, const Selection& selection) {
  Expansion e;
  Expander(g, e, &selection).run();
  return e;
}

bool exceeds_expansion_limit(const CompactGraph& g) {
  Expansion e;
  try {
    Expander(g, e).count_only();
  } catch (const InvalidPlan& failure) {
    if (failure.diag.rule == "plan-too-large") return true;
    throw;
  }
  return false;
}

namespace {

// Instances of `cond` over `axes`: single-axis comparisons are counted per
// axis, the axes of multi-axis comparisons enumerated together.
int64_t count_satisfying(const Mesh& m, const Condition& cond, const std::vector<int>& axes) {
  AxisMask joint = 0;
  for (const Comparison& k : cond.all)
    if (__builtin_popcount(k.diff.mask()) > 1) joint |= k.diff.mask();
  int64_t total = 1;
  std::vector<int> enumerated;
  for (int a : axes) {
    const int64_t size = a == kMbAxis ? m.mb : m.size(a);
    if (joint & (1u << a)) {
      enumerated.push_back(a);
      continue;
    }
    int64_t n = 0;
    Coord c{};
    for (int64_t x = 0; x < size; ++x) {
      c[a] = x;
      bool ok = true;
      for (const Comparison& k : cond.all)
        if (k.diff.mask() == (1u << a) && !k.holds(c)) ok = false;
      n += ok;
    }
    total *= n;
  }
  if (enumerated.empty()) {
    for (const Comparison& k : cond.all)  // constant comparisons
      if (k.diff.mask() == 0 && !k.holds(Coord{})) return 0;
    return total;
  }
  int64_t n = 0;
  Coord c{};
  for (;;) {
    bool ok = true;
    for (const Comparison& k : cond.all)
      if ((k.diff.mask() & ~joint) == 0 && !k.holds(c)) ok = false;
    n += ok;
    size_t i = 0;
    for (; i < enumerated.size(); ++i) {
      const int a = enumerated[i];
      if (++c[a] < (a == kMbAxis ? m.mb : m.size(a))) break;
      c[a] = 0;
    }
    if (i == enumerated.size()) break;
  }
  return total * n;
}

}  // namespace

int64_t op_instance_count(const CompactGraph& g) {
  int64_t total = 0;
  for (const Program& p : g.programs)
    for (const OpTemplate& op : p.ops) {
      Condition both = p.on;
      both.all.insert(both.all.end(), op.when.all.begin(), op.when.all.end());
      // A group counts once: its axes (never in a condition) are not counted.
      std::vector<int> axes;
      for (int a : g.mesh.axes)
        if (std::find(op.group.begin(), op.group.end(), a) == op.group.end()) axes.push_back(a);
      if (op.per_mb) axes.push_back(kMbAxis);
      total += count_satisfying(g.mesh, both, axes);
    }
  return total;
}

}  // namespace shardproof::compact
