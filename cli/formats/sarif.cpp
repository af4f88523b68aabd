// `verify --format sarif`: a SARIF 2.1.0 log (the format code-scanning
// services take). One run; one rule per kind of problem; one result per
// finding, invalid plan or internal error, located in the plan's files.
#include <nlohmann/json.hpp>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

using nlohmann::ordered_json;

struct Rule {
  const char* id;
  const char* name;
  const char* level;  // the default level of its results
  const char* text;
};

// Indices into kRules: results name their rule by id and by index.
enum RuleIndex { kNotEquivalent, kUnknown, kInvalidPlan, kInternalError };
constexpr Rule kRules[] = {
    {"not-equivalent", "NotEquivalent", "error",
     "The parallel graph does not compute what the logical graph computes: a claimed region "
     "differs from the logical tensor, or a logical output element is not covered"},
    {"unknown", "Unknown", "warning",
     "A claim was not decided (solver resource limit, timeout or unsupported construct); "
     "never treated as equivalent"},
    {"invalid-plan", "InvalidPlan", "error",
     "The plan breaks a rule of the plan format (shardproof-plan/1); nothing was verified"},
    {"internal-error", "InternalError", "error",
     "The plan could not be read, or the verifier failed unexpectedly"},
};

// A URI for a path: a relative path stays a relative reference (resolved
// against the repository's root by code-scanning services), an absolute one
// becomes a file:// URI. Unreserved characters and "/" stay; every other
// byte is percent-encoded (so a ":" never reads as a scheme).
std::string path_to_uri(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = !path.empty() && path[0] == '/' ? "file://" : "";
  for (unsigned char c : path) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                c == '-' || c == '.' || c == '_' || c == '~' || c == '/';
    if (keep) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

ordered_json location(const SourceLocation& where) {
  ordered_json physical = {{"artifactLocation", {{"uri", path_to_uri(where.file)}}}};
  if (where.line > 0) {
    physical["region"] = {{"startLine", where.line}};
    if (where.column > 0) physical["region"]["startColumn"] = where.column;
  }
  return ordered_json::array({{{"physicalLocation", std::move(physical)}}});
}

ordered_json result(RuleIndex rule, const std::string& text, const SourceLocation& where) {
  return {{"ruleId", kRules[rule].id},
          {"ruleIndex", static_cast<int>(rule)},
          {"level", kRules[rule].level},
          {"message", {{"text", text}}},
          {"locations", location(where)}};
}

ordered_json related_location(const SourceLocation& where, int id, const std::string& text) {
  ordered_json one = location(where)[0];
  one["id"] = id;
  one["message"] = {{"text", text}};
  return one;
}

// Located at the producing op (or the user's line); the logical tensor's
// declaration and a captured plan's further source lines are related.
ordered_json finding_result(const LocatedReport& located, size_t i) {
  const Report& r = located.report;
  const Finding& f = r.findings[i];
  ordered_json out = result(f.kind == "unknown" ? kUnknown : kNotEquivalent,
                            located_summary(located, i), located.findings[i]);
  out["properties"] = {
      {"plan", r.plan_path}, {"kind", f.kind},         {"stage", f.stage},
      {"tensor", f.tensor},  {"elements", f.elements}, {"parallelTensors", f.parallel_tensors},
      {"ops", f.ops}};
  if (!f.also_failing.empty()) out["properties"]["alsoFailing"] = f.also_failing;
  if (i < located.sites.size() && !located.sites[i].empty()) {
    ordered_json ranks = ordered_json::array();
    for (const MeshSite& s : located.sites[i])
      if (ranks.empty() || ranks.back() != s.rank) ranks.push_back(s.rank);
    out["properties"]["ranks"] = std::move(ranks);
  }
  ordered_json related = ordered_json::array();
  const SourceLocation& tensor = located.logical_tensors.at(i);
  if (!tensor.file.empty())
    related.push_back(related_location(tensor, 0, "logical tensor " + f.tensor));
  for (size_t k = 1; k < f.sources.size(); ++k)
    related.push_back(related_location({f.sources[k].file, static_cast<int>(f.sources[k].line), 0},
                                       static_cast<int>(k), source_to_string(f.sources[k])));
  if (!related.empty()) out["relatedLocations"] = std::move(related);
  return out;
}

// The results of one plan: its findings, or the verdict itself when nothing
// more precise says why it is not equivalent.
void add_results(const LocatedReport& located, ordered_json& results) {
  const Report& r = located.report;
  for (size_t i = 0; i < r.findings.size(); ++i) results.push_back(finding_result(located, i));
  switch (r.verdict) {
    case Verdict::Equivalent:
      break;
    case Verdict::Invalid: {
      std::string text = r.error;
      if (r.invalid) {
        text = "[" + r.invalid->rule + "] " +
               (r.invalid->pointer.empty() ? std::string("(root)") : r.invalid->pointer) + ": " +
               r.invalid->message;
      }
      ordered_json out = result(kInvalidPlan, "invalid plan: " + text, located.plan);
      out["properties"] = {{"plan", r.plan_path}};
      if (r.invalid)
        out["properties"].update({{"rule", r.invalid->rule}, {"pointer", r.invalid->pointer}});
      results.push_back(std::move(out));
      break;
    }
    case Verdict::InternalError:
      results.push_back(result(kInternalError, "internal error: " + r.error, located.plan));
      results.back()["properties"] = {{"plan", r.plan_path}};
      break;
    case Verdict::NotEquivalent:
    case Verdict::Unknown:
      if (r.findings.empty()) {
        bool unknown = r.verdict == Verdict::Unknown;
        results.push_back(result(
            unknown ? kUnknown : kNotEquivalent,
            unknown ? "not every claim was decided" : "not equivalent, and no finding says where",
            located.plan));
        results.back()["properties"] = {{"plan", r.plan_path}};
      }
      break;
  }
}

}  // namespace

std::string render_sarif(const std::vector<LocatedReport>& reports) {
  ordered_json rules = ordered_json::array();
  for (const Rule& rule : kRules) {
    rules.push_back({{"id", rule.id},
                     {"name", rule.name},
                     {"shortDescription", {{"text", rule.text}}},
                     {"defaultConfiguration", {{"level", rule.level}}}});
  }
  ordered_json driver = {{"name", "shardproof"}, {"version", SHARDPROOF_VERSION}};
  if (std::string(SHARDPROOF_HOMEPAGE).size() > 0) driver["informationUri"] = SHARDPROOF_HOMEPAGE;
  driver["rules"] = std::move(rules);

  ordered_json results = ordered_json::array();
  bool executed = true;
  for (const LocatedReport& located : reports) {
    add_results(located, results);
    executed = executed && located.report.verdict != Verdict::InternalError;
  }
  ordered_json log = {
      {"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
      {"version", "2.1.0"},
      {"runs", ordered_json::array(
                   {{{"tool", {{"driver", std::move(driver)}}},
                     {"invocations", ordered_json::array({{{"executionSuccessful", executed}}})},
                     {"columnKind", "unicodeCodePoints"},
                     {"results", std::move(results)}}})}};
  // Messages may quote bytes of a garbage plan: invalid UTF-8 is replaced
  // (U+FFFD), so the log is always valid JSON.
  return log.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace shardproof::cli
