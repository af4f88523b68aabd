#include "engine/format/plan_text.h"

#include <vector>

#include <nlohmann/json.hpp>

#include "engine/format/file_text.h"
#include "engine/format/top_level_scan.h"
#include "engine/json/json_source.h"

namespace shardproof {
namespace {

// Streams the document and watches only the values of top-level keys.
class GraphReferenceFinder : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool found = false;

  bool null() override { return value(false); }
  bool boolean(bool) override { return value(false); }
  bool number_integer(number_integer_t) override { return value(false); }
  bool number_unsigned(number_unsigned_t) override { return value(false); }
  bool number_float(number_float_t, const string_t&) override { return value(false); }
  bool string(string_t&) override { return value(true); }
  bool binary(binary_t&) override { return value(false); }
  bool start_object(std::size_t) override {
    value(false);
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    graph_key_ = depth_ == 1 && (key == "logical" || key == "parallel");
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    value(false);
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool value(bool is_string) {
    if (depth_ == 1 && graph_key_ && is_string) found = true;
    graph_key_ = false;
    return true;
  }
  int depth_ = 0;
  bool graph_key_ = false;
};

}  // namespace

bool has_graph_references(std::string_view text) {
  // The scan skips the graphs' bodies quickly; only a plan it finds a
  // reference in (rare, and small without its graphs) is parsed, which keeps
  // the answer exactly the parser's for malformed text too.
  if (!has_top_level_string(text, {"logical", "parallel"})) return false;
  GraphReferenceFinder finder;
  nlohmann::json::sax_parse(text.begin(), text.end(), &finder, nlohmann::json::input_format_t::json,
                            false);
  return finder.found;
}

std::optional<std::string> inline_graph_references(const std::string& text,
                                                   const std::string& base_dir, std::string* why) {
  jsonsrc::ParseResult plan = jsonsrc::parse(text);
  if (!plan.value || !plan.value->is(jsonsrc::Value::Kind::Object)) {
    *why = "the plan is not a JSON object";
    return std::nullopt;
  }
  // A graph's values stay in its own document: keep each one until written.
  std::vector<jsonsrc::ParseResult> graphs;
  for (const char* key : {"logical", "parallel"}) {
    int i = plan.value->find(key);
    if (i < 0 || !plan.value->items[i].is(jsonsrc::Value::Kind::String)) continue;
    const std::string& ref = plan.value->items[i].text;
    std::optional<std::string> confined = graph_file_path(base_dir, ref, why);
    if (!confined) return std::nullopt;
    const std::string& path = *confined;
    std::optional<std::string> graph_text = read_file_text(path, why);
    if (!graph_text) return std::nullopt;
    jsonsrc::ParseResult& graph = graphs.emplace_back(jsonsrc::parse(*graph_text));
    if (!graph.value) {
      *why = "graph file " + path + " is not JSON";
      return std::nullopt;
    }
    plan.value->items[i] = *graph.value;
  }
  return jsonsrc::serialize(*plan.value);
}

}  // namespace shardproof
