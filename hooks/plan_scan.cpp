#include "hooks/plan_scan.h"

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace shardproof::hooks {
namespace {

// SAX handler that records the top-level string values of "format",
// "logical" and "parallel" and ignores everything nested.
class HeaderScanner : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HeaderScanner(PlanHeader* out) : out_(out) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool) override { return value(nullptr); }
  bool number_integer(number_integer_t) override { return value(nullptr); }
  bool number_unsigned(number_unsigned_t) override { return value(nullptr); }
  bool number_float(number_float_t, const string_t&) override { return value(nullptr); }
  bool string(string_t& s) override { return value(&s); }
  bool binary(binary_t&) override { return value(nullptr); }
  bool start_object(std::size_t) override { return open(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    if (depth_ == 1) key_ = key;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  bool open() {
    value(nullptr);
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }
  bool value(const std::string* s) {
    if (depth_ == 1 && s) {
      if (key_ == "format") out_->is_plan = is_plan_format(*s);
      if (key_ == "logical" || key_ == "parallel") out_->graph_refs.push_back(*s);
    }
    if (depth_ == 1) key_.clear();
    return true;
  }

  PlanHeader* out_;
  int depth_ = 0;
  std::string key_;
};

}  // namespace

bool is_plan_format(std::string_view format) {
  constexpr std::string_view kPrefix = "shardproof-plan/1";
  if (format.substr(0, kPrefix.size()) != kPrefix) return false;
  std::string_view rest = format.substr(kPrefix.size());
  if (rest.empty()) return true;
  if (rest.size() < 2 || rest[0] != '.') return false;
  for (char c : rest.substr(1))
    if (c < '0' || c > '9') return false;
  return true;
}

PlanHeader scan_plan_header(const std::string& text) {
  PlanHeader header;
  // Most JSON files in a repository are not plans: without the format's
  // name spelled out (or a \u escape that could spell it) there is nothing
  // to parse.
  if (!memmem(text.data(), text.size(), "shardproof-plan/1", 17) &&
      !memmem(text.data(), text.size(), "\\u", 2))
    return header;
  HeaderScanner scanner(&header);
  nlohmann::json::sax_parse(text, &scanner, nlohmann::json::input_format_t::json, false);
  if (!header.is_plan) header.graph_refs.clear();
  return header;
}

std::optional<std::string> resolve_graph_ref(const std::string& plan, const std::string& ref) {
  std::filesystem::path r(ref);
  if (ref.empty() || r.is_absolute()) return std::nullopt;
  std::string path = (std::filesystem::path(plan).parent_path() / r).lexically_normal().string();
  if (path.empty() || path == "." || path == ".." || path.rfind("../", 0) == 0) return std::nullopt;
  return path;
}

}  // namespace shardproof::hooks
