// From a failure found in the expansion back to the compact file: the v1
// rules report a JSON pointer into the expanded graph ("/ops/812/in/1");
// this finds the template and instance that made that op or tensor and
// points at the same place inside the template.
#include <charconv>

#include "engine/format/compact/compact_expand.h"

namespace shardproof::compact {
namespace {

using plan_detail::Node;

std::vector<std::string> tokens(const std::string& pointer) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < pointer.size() && pointer[i] == '/') {
    size_t next = pointer.find('/', i + 1);
    std::string tok =
        pointer.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
    std::string plain;
    for (size_t k = 0; k < tok.size(); ++k) {
      if (tok[k] == '~' && k + 1 < tok.size()) {
        plain += tok[k + 1] == '1' ? '/' : '~';
        ++k;
      } else {
        plain += tok[k];
      }
    }
    out.push_back(std::move(plain));
    if (next == std::string::npos) break;
    i = next;
  }
  return out;
}

std::optional<size_t> number(const std::string& s) {
  size_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// As deep as the template has the same place.
Node walk(Node n, const std::vector<std::string>& rest, size_t from) {
  for (size_t i = from; i < rest.size(); ++i) {
    if (n->is(jsonsrc::Value::Kind::Object)) {
      std::optional<Node> next = n.get(rest[i]);
      if (!next) break;
      n = *next;
    } else if (n->is(jsonsrc::Value::Kind::Array)) {
      std::optional<size_t> k = number(rest[i]);
      if (!k || *k >= n->items.size()) break;
      n = n.item(*k);
    } else {
      break;
    }
  }
  return n;
}

Coord coord_of(const Origin& o) {
  Coord c{};
  for (int a = 0; a < kAxisCount; ++a) c[a] = o.c[a];
  return c;
}

}  // namespace

Diagnostic locate(const CompactGraph& g, const Expansion& e, const Diagnostic& d) {
  std::vector<std::string> tok = tokens(d.pointer);
  std::optional<Node> at;
  Coord c{};
  bool per_mb = false;
  auto tensor_at = [&](uint32_t index, std::vector<std::string> rest, size_t from) {
    const Origin& o = e.tensors[index];
    const TensorTemplate& t = g.programs[o.program].tensors[o.element];
    at = walk(t.node, rest, from);
    c = coord_of(o);
    per_mb = t.per_mb;
  };
  if (tok.size() >= 2 && tok[0] == "tensors") {
    if (auto it = e.tensor_index.find(tok[1]); it != e.tensor_index.end())
      tensor_at(it->second, tok, 2);
  } else if (tok.size() >= 2 && (tok[0] == "inputs" || tok[0] == "outputs")) {
    const std::vector<uint32_t>& list = tok[0] == "inputs" ? e.inputs : e.outputs;
    if (std::optional<size_t> i = number(tok[1]); i && *i < list.size())
      tensor_at(list[*i], {tok[0] == "inputs" ? "input" : "output"}, 0);
  } else if (tok.size() >= 2 && tok[0] == "ops") {
    std::optional<size_t> i = number(tok[1]);
    if (i && *i < e.ops.size()) {
      const Origin& o = e.ops[*i];
      const OpTemplate& op = g.programs[o.program].ops[o.element];
      c = coord_of(o);
      per_mb = op.per_mb;
      std::vector<std::string> rest(tok.begin() + 2, tok.end());
      // A collective's j-th in/out is member j's: the template's only one.
      if (op.kind == OpTemplate::Kind::Collective && rest.size() >= 2 &&
          (rest[0] == "in" || rest[0] == "out")) {
        if (std::optional<size_t> j = number(rest[1])) {
          for (size_t k = op.group.size(); k-- > 0;) {
            int64_t size = g.mesh.size(op.group[k]);
            c[op.group[k]] = static_cast<int64_t>(*j) % size;
            *j /= static_cast<size_t>(size);
          }
          rest[1] = "0";
        }
      }
      at = walk(op.node, rest, 0);
    }
  }
  Diagnostic out = d;
  if (!at) {
    // No template made it (cannot happen for a well-formed pointer): keep
    // the rule and message, without a place in the compact file.
    out.pointer = "/parallel" + d.pointer;
    out.line = out.column = 0;
    return out;
  }
  out.file = at->file();
  out.pointer = at->pointer();
  out.line = (*at)->pos.line;
  out.column = (*at)->pos.column;
  out.message += " (instance " + g.mesh.describe(c, per_mb) + ")";
  return out;
}

}  // namespace shardproof::compact
