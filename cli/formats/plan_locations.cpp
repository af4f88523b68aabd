#include "cli/formats/plan_locations.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "engine/format/file_text.h"
#include "engine/json/json_source.h"

namespace shardproof::cli {

namespace {

namespace fs = std::filesystem;
using jsonsrc::Pos;
using jsonsrc::Value;

// The declarations of one graph (inline in the plan, or in a graph file).
struct GraphIndex {
  std::string file;
  std::unordered_map<std::string, Pos> tensors;  // name -> its key in "tensors"
  std::unordered_map<std::string, Pos> ops;      // name -> its "name" key
  std::vector<Pos> op_starts;                    // every op, by index: where it starts
  // Parallel graph: a tensor's "rank", an op's "rank" or "group".
  std::unordered_map<std::string, std::vector<int64_t>> ranks;
  // The ops, by name and by the tensors they write; `document` owns them.
  std::unordered_map<std::string, const Value*> op_by_name, producer;
  std::shared_ptr<const Value> document;
};

const Value* member(const Value& object, const char* key) {
  if (!object.is(Value::Kind::Object)) return nullptr;
  int i = object.find(key);
  return i < 0 ? nullptr : &object.items[i];
}

// A small non-negative integer, or -1.
int64_t integer(const Value* v) {
  if (v == nullptr || !v->is(Value::Kind::Number) || v->text.empty() || v->text.size() > 9 ||
      v->text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoll(v->text);
}

std::vector<int64_t> ranks_of(const Value& decl) {
  std::vector<int64_t> out;
  if (int64_t r = integer(member(decl, "rank")); r >= 0) out.push_back(r);
  if (const Value* group = member(decl, "group"); group && group->is(Value::Kind::Array))
    for (const Value& r : group->items)
      if (integer(&r) >= 0) out.push_back(integer(&r));
  return out;
}

// A compact plan's parallel.mesh; else a captured plan's meta.mesh, or a
// generated plan's meta sizes (pp, dp, cp, tp: Megatron's rank order), when
// they multiply to world.
MeshShape mesh_of(const Value& root) {
  MeshShape mesh;
  const Value* parallel = member(root, "parallel");
  if (parallel == nullptr) return mesh;
  if (const Value* m = member(*parallel, "mesh")) {
    const Value* axes = member(*m, "axes");
    if (axes == nullptr || !axes->is(Value::Kind::Array)) return mesh;
    for (const Value& a : axes->items) {
      if (!a.is(Value::Kind::Array) || a.items.size() != 2 || !a.items[0].is(Value::Kind::String) ||
          integer(&a.items[1]) < 1)
        return MeshShape{};
      mesh.axes.push_back({a.items[0].text, integer(&a.items[1])});
    }
    mesh.microbatches = std::max<int64_t>(1, integer(member(*m, "mb")));
    mesh.source = "parallel.mesh";
    return mesh;
  }
  const Value* meta = member(root, "meta");
  const int64_t world = integer(member(*parallel, "world"));
  if (meta == nullptr || world < 1) return mesh;
  // A captured plan's meta.mesh: the harness's MESH in force, in its order
  // (row-major, the last axis fastest: docs/torch-harness.md).
  if (const Value* m = member(*meta, "mesh"); m && m->is(Value::Kind::Object)) {
    for (size_t i = 0; i < m->keys.size(); ++i)
      if (integer(&m->items[i]) >= 1) mesh.axes.push_back({m->keys[i].name, integer(&m->items[i])});
    if (!mesh.axes.empty() && mesh.world() == world) {
      mesh.source = "meta.mesh";
      return mesh;
    }
    mesh = MeshShape{};
  }
  for (const char* axis : {"pp", "dp", "cp", "tp"}) {
    int64_t size = integer(member(*meta, axis));
    if (size > 1 || (size == 1 && axis != std::string("cp"))) mesh.axes.push_back({axis, size});
  }
  if (mesh.axes.empty() || mesh.world() != world) return MeshShape{};
  mesh.microbatches = std::max<int64_t>(1, integer(member(*meta, "microbatches")));
  mesh.source = "meta";
  return mesh;
}

GraphIndex index_graph(const Value& graph, std::string file) {
  GraphIndex g;
  g.file = std::move(file);
  if (const Value* tensors = member(graph, "tensors");
      tensors && tensors->is(Value::Kind::Object)) {
    for (size_t i = 0; i < tensors->keys.size(); ++i) {
      g.tensors.emplace(tensors->keys[i].name, tensors->keys[i].pos);  // the first of duplicates
      g.ranks.emplace(tensors->keys[i].name, ranks_of(tensors->items[i]));
    }
  }
  if (const Value* ops = member(graph, "ops"); ops && ops->is(Value::Kind::Array)) {
    for (const Value& op : ops->items) {
      g.op_starts.push_back(op.pos);
      int name = op.is(Value::Kind::Object) ? op.find("name") : -1;
      if (const Value* out = member(op, "out"); out && out->is(Value::Kind::Array))
        for (const Value& t : out->items)
          if (t.is(Value::Kind::String)) g.producer.emplace(t.text, &op);
      if (name >= 0 && op.items[name].is(Value::Kind::String)) {
        g.op_by_name.emplace(op.items[name].text, &op);
        g.ops.emplace(op.items[name].text, op.keys[name].pos);
        g.ranks.emplace(op.items[name].text, ranks_of(op));
      }
    }
  }
  return g;
}

// The plan's two graphs, indexed; a graph that cannot be read or parsed has
// an empty index (its findings then point at the plan).
class PlanLocator {
 public:
  PlanLocator(const std::string& path, const std::string& text) : path_(path) {
    jsonsrc::ParseResult parsed = jsonsrc::parse(text);
    if (!parsed.value) return;
    root_ = parsed.value;
    logical_ = graph(*parsed.value, "logical");
    parallel_ = graph(*parsed.value, "parallel");
    mesh_ = mesh_of(*parsed.value);
  }

  const MeshShape& mesh() const { return mesh_; }

  FindingOps ops(const Finding& f) const {
    FindingOps out;
    if (auto it = logical_.producer.find(f.tensor); it != logical_.producer.end())
      out.logical.push_back(jsonsrc::serialize(*it->second));
    for (const std::string& name : f.ops) {
      auto it = parallel_.op_by_name.find(name);
      if (it != parallel_.op_by_name.end()) out.parallel.push_back(jsonsrc::serialize(*it->second));
    }
    return out;
  }

  // The ranks of the finding's parallel tensors and of those failing with
  // them (else of its ops): as declared (v1), else by the coordinates their
  // names spell (a compact plan's instances); the micro-batch is the name's
  // "mb<N>" part.
  std::vector<MeshSite> sites(const Finding& f) const {
    std::set<MeshSite> out;
    std::vector<std::string> tensors = f.parallel_tensors;
    tensors.insert(tensors.end(), f.also_failing.begin(), f.also_failing.end());
    const std::vector<std::string>* const lists[] = {&tensors, &f.ops};
    for (const std::vector<std::string>* names : lists) {
      for (const std::string& name : *names) {
        std::map<std::string, int64_t> coords = name_coordinates(name);
        const int64_t mb = coords.count("mb") ? coords["mb"] : -1;
        auto it = parallel_.ranks.find(name);
        if (it != parallel_.ranks.end() && !it->second.empty()) {
          for (int64_t rank : it->second) out.insert({rank, mb});
        } else if (int64_t rank = rank_of(mesh_, coords); rank >= 0) {
          out.insert({rank, mb});
        }
      }
      if (!out.empty()) break;
    }
    return {out.begin(), out.end()};
  }

  // The producing parallel op first: a finding's fix is in the parallel graph.
  std::optional<SourceLocation> find(const Finding& f) const {
    for (const std::string& op : f.ops) {
      if (auto at = lookup(parallel_, parallel_.ops, op)) return at;
      if (auto at = unnamed_op(op)) return at;
    }
    for (const std::string& t : f.parallel_tensors) {
      if (auto at = lookup(parallel_, parallel_.tensors, t)) return at;
    }
    return logical_tensor(f);
  }

  std::optional<SourceLocation> logical_tensor(const Finding& f) const {
    return lookup(logical_, logical_.tensors, f.tensor);
  }

 private:
  // A graph is inline or a path relative to the plan, resolved as the
  // parser resolves it (so the file names match its diagnostics).
  GraphIndex graph(const Value& root, const char* key) const {
    const Value* g = member(root, key);
    if (g == nullptr) return {};
    if (!g->is(Value::Kind::String)) {
      GraphIndex index = index_graph(*g, path_);
      index.document = root_;
      return index;
    }
    if (g->text.empty()) return {};
    std::string base = fs::path(path_).parent_path().string();
    std::string why;
    std::optional<std::string> confined = graph_file_path(base, g->text, &why);
    if (!confined) return {};
    const std::string& resolved = *confined;
    std::optional<std::string> text = read_file_text(resolved);
    if (!text) return {};
    jsonsrc::ParseResult parsed = jsonsrc::parse(*text);
    if (!parsed.value) return {};
    GraphIndex index = index_graph(*parsed.value, resolved);
    index.document = parsed.value;
    return index;
  }

  static std::optional<SourceLocation> lookup(const GraphIndex& g,
                                              const std::unordered_map<std::string, Pos>& names,
                                              const std::string& name) {
    if (name.empty()) return std::nullopt;
    auto it = names.find(name);
    if (it == names.end()) return std::nullopt;
    return SourceLocation{g.file, it->second.line, it->second.column};
  }

  // An op without a name is shown as "#INDEX OP" (Op::display_name).
  std::optional<SourceLocation> unnamed_op(const std::string& display) const {
    if (display.size() < 2 || display[0] != '#') return std::nullopt;
    size_t end = display.find(' ');
    std::string digits = display.substr(1, end == std::string::npos ? end : end - 1);
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    size_t index = std::stoul(digits);
    if (index >= parallel_.op_starts.size()) return std::nullopt;
    const Pos& p = parallel_.op_starts[index];
    return SourceLocation{parallel_.file, p.line, p.column};
  }

  std::string path_;
  std::shared_ptr<const Value> root_;
  GraphIndex logical_, parallel_;
  MeshShape mesh_;
};

}  // namespace

LocatedReport locate_report(Report report, const std::string* plan_text, bool captured) {
  LocatedReport out;
  const std::string path = report.plan_path.empty() ? report.plan_name : report.plan_path;
  out.plan = SourceLocation{path, 1, 0};
  if (report.verdict == Verdict::InternalError) out.plan.line = 0;
  if (report.verdict == Verdict::Invalid && report.invalid) {
    const Diagnostic& d = *report.invalid;
    out.plan = SourceLocation{d.file.empty() ? path : d.file, std::max(d.line, 1), d.column};
  }
  std::unique_ptr<PlanLocator> locator;
  if (plan_text != nullptr && !report.findings.empty())
    locator = std::make_unique<PlanLocator>(path, *plan_text);
  for (const Finding& f : report.findings) {
    out.sites.push_back(locator ? locator->sites(f) : std::vector<MeshSite>{});
    out.ops.push_back(locator ? locator->ops(f) : FindingOps{});
    std::optional<SourceLocation> tensor =
        locator && !captured ? locator->logical_tensor(f) : std::nullopt;
    out.logical_tensors.push_back(tensor.value_or(SourceLocation{}));
    // A captured plan's finding belongs at the user's own line, not the plan's.
    if (!f.sources.empty()) {
      const SourceRef& src = f.sources.front();
      out.findings.push_back(SourceLocation{src.file, static_cast<int>(src.line), 0});
      continue;
    }
    std::optional<SourceLocation> at = locator && !captured ? locator->find(f) : std::nullopt;
    out.findings.push_back(at ? *at : SourceLocation{path, 1, 0});
  }
  if (locator) out.mesh = locator->mesh();
  out.report = std::move(report);
  return out;
}

}  // namespace shardproof::cli
