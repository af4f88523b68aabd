// Top level of a plan: the file, format, name, meta, and the two graphs (inline
// or referenced by path). The graph and lineage rules live in
// plan_validation_*.cpp.
#include "engine/format/plan_parser.h"

#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/format/compact/compact_expand.h"
#include "engine/format/file_text.h"
#include "engine/format/v1/plan_validation.h"
#include "engine/format/v1/schedule_section.h"
#include "engine/json/json_source.h"

namespace shardproof {
namespace {

namespace fs = std::filesystem;
using plan_detail::InvalidPlan;
using plan_detail::Node;

constexpr const char* kFormat = "shardproof-plan/1";
// The compact form: programs over a device mesh, read by expansion.
constexpr const char* kCompactFormat = "shardproof-plan/1.1";

// A file that exists but cannot be read: an I/O failure, not an invalid plan.
struct IoFailure {
  std::string message;
};

class PlanReader {
 public:
  PlanReader(std::string display_name, std::string base_dir, ParseOptions options = {})
      : display_(std::move(display_name)), base_dir_(std::move(base_dir)), options_(options) {}

  Plan read(const std::string& text) {
    Node root = parse_document(text, display_);
    expect_object(root, "the plan");
    Plan plan;
    plan.path = display_;
    plan.format = read_format(root);
    check_keys(root, {"format", "name", "meta", "logical", "parallel", "schedule"}, "the plan");
    if (std::optional<Node> name = root.get("name")) plan.name = expect_string(*name, "name");
    std::optional<Node> meta = root.get("meta");
    plan.meta_json = meta ? jsonsrc::serialize(meta->value()) : "{}";

    Node logical = graph_node(root, "logical");
    Node parallel = graph_node(root, "parallel");
    std::optional<Node> schedule = root.get("schedule");
    if (plan.format == kCompactFormat) {
      read_compact(logical, parallel, plan);
      if (schedule)
        plan.schedule_json = plan_detail::read_schedule_section(*schedule, plan.parallel.world);
      return plan;
    }
    plan_detail::GraphSyntax lsyn = plan_detail::read_graph(logical, false, plan.logical);
    plan_detail::GraphSyntax psyn = plan_detail::read_graph(parallel, true, plan.parallel);
    plan_detail::check_lineage(plan.logical, lsyn, plan.parallel, psyn);
    plan_detail::check_map_arity({{&plan.logical, &lsyn}, {&plan.parallel, &psyn}});
    if (schedule)
      plan.schedule_json = plan_detail::read_schedule_section(*schedule, plan.parallel.world);
    return plan;
  }

 private:
  // Parses a JSON document held for the reader's lifetime (nodes point into it).
  Node parse_document(const std::string& text, const std::string& file) {
    files_.push_back(file);
    jsonsrc::ParseResult parsed = jsonsrc::parse(text);
    if (parsed.error) {
      const jsonsrc::ParseError& e = *parsed.error;
      throw InvalidPlan{
          Diagnostic{e.rule, files_.back(), e.pointer, e.pos.line, e.pos.column, e.message}};
    }
    docs_.push_back(std::move(parsed.value));
    return Node(*docs_.back(), files_.back());
  }

  std::string read_format(const Node& root) {
    Node format = require(root, "format", "the plan", "format");
    if (!format->is(jsonsrc::Value::Kind::String) ||
        (format->text != kFormat && format->text != kCompactFormat))
      format.fail("format", std::string("expected \"") + kFormat + "\" or \"" + kCompactFormat +
                                "\", found " + jsonsrc::describe(format.value()));
    return format->text;
  }

  // A 1.1 plan: the compact parallel graph is expanded into the v1 graph it
  // denotes, which then meets every v1 rule; a rule the expansion breaks is
  // reported at the compact template and instance that made the place.
  void read_compact(const Node& logical, const Node& parallel, Plan& plan) {
    plan_detail::GraphSyntax lsyn = plan_detail::read_graph(logical, false, plan.logical);
    compact::CompactGraph graph = compact::read_compact(parallel);
    if (options_.compact == ParseOptions::Compact::Classes ||
        (options_.compact == ParseOptions::Compact::Auto &&
         compact::exceeds_expansion_limit(graph))) {
      // Too large to expand: the class verifier reads the templates. The
      // documents stay alive with them (their nodes point into them).
      auto source = std::make_shared<compact::CompactSource>(std::move(graph));
      source->documents = docs_;
      source->files = std::make_shared<std::deque<std::string>>(std::move(files_));
      source->logical_syntax = std::move(lsyn);
      plan.parallel.parallel = true;
      plan.parallel.world = static_cast<int>(source->graph.mesh.world);
      plan.parallel.source_file = parallel.file();
      plan.compact = std::move(source);
      return;
    }
    compact::Expansion expansion = compact::expand(graph);
    const std::string expanded_name = "<expansion of " + parallel.file() + ">";
    try {
      Node expanded = parse_document(expansion.text, expanded_name);
      std::string().swap(expansion.text);  // the document holds what it needs
      plan_detail::GraphSyntax psyn = plan_detail::read_graph(expanded, true, plan.parallel);
      plan_detail::check_lineage(plan.logical, lsyn, plan.parallel, psyn);
      plan_detail::check_map_arity({{&plan.logical, &lsyn}, {&plan.parallel, &psyn}});
    } catch (const InvalidPlan& e) {
      if (e.diag.file != expanded_name) throw;
      throw InvalidPlan{compact::locate(graph, expansion, e.diag)};
    }
    plan.parallel.source_file = parallel.file();
  }

  // A graph is inline or a path (relative to the plan file) to a file that
  // holds the graph alone; errors in it name that file.
  Node graph_node(const Node& root, const std::string& key) {
    Node n = require(root, key, "the plan");
    if (n->is(jsonsrc::Value::Kind::Object)) return n;
    if (!n->is(jsonsrc::Value::Kind::String))
      n.fail("type", key + ": expected a graph object or a path to a graph file, found " +
                         jsonsrc::describe(n.value()));
    if (n->text.empty()) n.fail("graph-ref", key + ": the graph file path is empty");
    std::string why;
    std::optional<std::string> confined = graph_file_path(base_dir_, n->text, &why);
    if (!confined) n.fail("graph-ref", key + ": " + why);
    const std::string& resolved = *confined;
    std::error_code ec;
    if (!fs::exists(resolved, ec) || fs::is_directory(resolved, ec))
      n.fail("graph-ref",
             key + ": graph file \"" + n->text + "\" does not exist (looked for " + resolved + ")");
    std::string error;
    std::optional<std::string> text = read_file_text(resolved, &error);
    if (!text) throw IoFailure{error};
    return parse_document(*text, resolved);
  }

  std::string display_;
  std::string base_dir_;
  ParseOptions options_;
  std::vector<std::shared_ptr<jsonsrc::Value>> docs_;
  std::deque<std::string> files_;  // stable addresses: nodes keep pointers
};

}  // namespace

ParseResult parse_plan_file(const std::string& path, ParseOptions options) {
  std::string error;
  std::optional<std::string> text = read_file_text(path, &error);
  if (!text) {
    ParseResult r;
    r.io_error = error;
    return r;
  }
  return parse_plan_text(*text, path, fs::path(path).parent_path().string(), options);
}

ParseResult parse_plan_text(const std::string& text, const std::string& display_name,
                            const std::string& base_dir, ParseOptions options) {
  ParseResult result;
  try {
    result.plan = PlanReader(display_name, base_dir, options).read(text);
  } catch (const InvalidPlan& e) {
    result.error = e.diag;
  } catch (const IoFailure& e) {
    result.io_error = e.message;
  } catch (const std::exception& e) {
    // Not a plan problem (memory, a bug): report it as an internal failure.
    result.io_error = std::string("internal error while reading ") + display_name + ": " + e.what();
  }
  return result;
}

}  // namespace shardproof
