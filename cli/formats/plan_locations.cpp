#include "cli/formats/plan_locations.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
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
};

const Value* member(const Value& object, const char* key) {
  if (!object.is(Value::Kind::Object)) return nullptr;
  int i = object.find(key);
  return i < 0 ? nullptr : &object.items[i];
}

GraphIndex index_graph(const Value& graph, std::string file) {
  GraphIndex g;
  g.file = std::move(file);
  if (const Value* tensors = member(graph, "tensors");
      tensors && tensors->is(Value::Kind::Object)) {
    for (size_t i = 0; i < tensors->keys.size(); ++i)
      g.tensors.emplace(tensors->keys[i].name, tensors->keys[i].pos);  // the first of duplicates
  }
  if (const Value* ops = member(graph, "ops"); ops && ops->is(Value::Kind::Array)) {
    for (const Value& op : ops->items) {
      g.op_starts.push_back(op.pos);
      int name = op.is(Value::Kind::Object) ? op.find("name") : -1;
      if (name >= 0 && op.items[name].is(Value::Kind::String))
        g.ops.emplace(op.items[name].text, op.keys[name].pos);
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
    logical_ = graph(*parsed.value, "logical");
    parallel_ = graph(*parsed.value, "parallel");
  }

  std::optional<SourceLocation> find(const Finding& f) const {
    if (auto at = lookup(logical_, logical_.tensors, f.tensor)) return at;
    for (const std::string& op : f.ops) {
      if (auto at = lookup(parallel_, parallel_.ops, op)) return at;
      if (auto at = unnamed_op(op)) return at;
    }
    for (const std::string& t : f.parallel_tensors) {
      if (auto at = lookup(parallel_, parallel_.tensors, t)) return at;
    }
    return std::nullopt;
  }

 private:
  // A graph is inline or a path relative to the plan, resolved as the
  // parser resolves it (so the file names match its diagnostics).
  GraphIndex graph(const Value& root, const char* key) const {
    const Value* g = member(root, key);
    if (g == nullptr) return {};
    if (!g->is(Value::Kind::String)) return index_graph(*g, path_);
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
    return index_graph(*parsed.value, resolved);
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
  GraphIndex logical_, parallel_;
};

}  // namespace

LocatedReport locate_report(Report report, const std::string* plan_text) {
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
    // A captured plan's finding belongs at the user's own line, not the plan's.
    if (!f.sources.empty()) {
      const SourceRef& src = f.sources.front();
      out.findings.push_back(SourceLocation{src.file, static_cast<int>(src.line), 0});
      continue;
    }
    std::optional<SourceLocation> at = locator ? locator->find(f) : std::nullopt;
    out.findings.push_back(at ? *at : SourceLocation{path, 1, 0});
  }
  out.report = std::move(report);
  return out;
}

}  // namespace shardproof::cli
