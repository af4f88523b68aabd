#include "daemon/plan_text.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/json_source.h"

namespace shardproof::daemon {
namespace {

namespace fs = std::filesystem;

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

std::optional<std::string> read_file(const fs::path& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  if (in) buf << in.rdbuf();
  if (!in || in.bad()) {
    *why = "cannot read " + path.string();
    return std::nullopt;
  }
  return buf.str();
}

// A reference needs a top-level key "logical" or "parallel" with a string
// value. Without \u escapes such a key is spelled out literally, followed
// by ':' and '"': when that pattern is absent there is no reference, and
// the full parse (tens of ms for a large plan) is skipped.
bool may_have_graph_references(const std::string& text) {
  // memmem, not std::string::find: JSON is full of '"', on which find would
  // stop to compare at every string.
  auto find = [&](const char* needle, size_t from) -> size_t {
    if (from >= text.size()) return std::string::npos;
    const void* hit = memmem(text.data() + from, text.size() - from, needle, std::strlen(needle));
    return hit ? static_cast<size_t>(static_cast<const char*>(hit) - text.data())
               : std::string::npos;
  };
  if (find("\\u", 0) != std::string::npos) return true;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  for (const char* key : {"\"logical\"", "\"parallel\""}) {
    size_t len = std::strlen(key);
    for (size_t p = find(key, 0); p != std::string::npos; p = find(key, p + 1)) {
      size_t i = p + len;
      while (i < text.size() && space(text[i])) ++i;
      if (i >= text.size() || text[i] != ':') continue;
      ++i;
      while (i < text.size() && space(text[i])) ++i;
      if (i < text.size() && text[i] == '"') return true;
    }
  }
  return false;
}

}  // namespace

bool has_graph_references(const std::string& text) {
  if (!may_have_graph_references(text)) return false;
  GraphReferenceFinder finder;
  nlohmann::json::sax_parse(text, &finder, nlohmann::json::input_format_t::json, false);
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
    // As engine/plan_parser.cpp resolves it: relative to the plan's folder.
    fs::path path =
        fs::path(ref).is_absolute() || base_dir.empty() ? fs::path(ref) : fs::path(base_dir) / ref;
    std::optional<std::string> graph_text = read_file(path.lexically_normal(), why);
    if (!graph_text) return std::nullopt;
    jsonsrc::ParseResult& graph = graphs.emplace_back(jsonsrc::parse(*graph_text));
    if (!graph.value) {
      *why = "graph file " + path.string() + " is not JSON";
      return std::nullopt;
    }
    plan.value->items[i] = *graph.value;
  }
  return jsonsrc::serialize(*plan.value);
}

}  // namespace shardproof::daemon
