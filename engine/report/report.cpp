// Verdict names, exit codes and the two renderings of a Report (text for a
// person, JSON for tools), whose pieces (headline, finding text and summary)
// the CI formats in cli/formats/ reuse. The JSON schema is documented in
// docs/cli.md.
#include "engine/report/report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace shardproof {

namespace {

// Findings can carry thousands of elements; a person needs the first few.
constexpr size_t kMaxTextElements = 8;
// A counterexample line longer than this is cut, so one finding stays readable.
constexpr size_t kMaxCounterexampleChars = 400;

const char* verdict_title(Verdict v) {
  switch (v) {
    case Verdict::Equivalent:
      return "EQUIVALENT";
    case Verdict::NotEquivalent:
      return "NOT EQUIVALENT";
    case Verdict::Invalid:
      return "INVALID PLAN";
    case Verdict::Unknown:
      return "UNKNOWN";
    case Verdict::InternalError:
      return "INTERNAL ERROR";
  }
  return "INTERNAL ERROR";
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

std::string index_to_string(const std::vector<int64_t>& index) {
  std::string out = "[";
  for (size_t i = 0; i < index.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(index[i]);
  }
  return out + "]";
}

std::string elements_to_text(const std::vector<std::vector<int64_t>>& elements) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < elements.size() && i < kMaxTextElements; ++i) {
    shown.push_back(index_to_string(elements[i]));
  }
  std::string out = join(shown, " ");
  if (elements.size() > kMaxTextElements) {
    out += " (+" + std::to_string(elements.size() - kMaxTextElements) + " more)";
  }
  return out;
}

std::string shorten(std::string s) {
  if (s.size() > kMaxCounterexampleChars) {
    s.resize(kMaxCounterexampleChars);
    s += " ...";
  }
  return s;
}

// Never throws on invalid UTF-8 inside strings (replaced by U+FFFD).
std::string compact(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// {"shape": [...], "values": [...]}: how the engine writes a tensor's values.
bool is_tensor_value(const nlohmann::json& v) {
  return v.is_object() && v.contains("shape") && v.contains("values") && v["values"].is_array();
}

// "[2, 2] = -1 -1 1 1" (values row-major, at most kMaxTextValues of them).
std::string tensor_value_to_text(const nlohmann::json& v) {
  constexpr size_t kMaxTextValues = 16;
  std::string out = compact(v["shape"]) + " =";
  const nlohmann::json& values = v["values"];
  for (size_t i = 0; i < values.size() && i < kMaxTextValues; ++i) {
    out += " " + (values[i].is_string() ? values[i].get<std::string>() : compact(values[i]));
  }
  if (values.size() > kMaxTextValues || v.value("truncated", nlohmann::json(false)) == true) {
    out += " ...";
  }
  return out;
}

// The engine decides the counterexample's shape; known patterns (named
// tensors, lists of per-element differences) get one line each, anything
// else is dumped compactly on one line.
void counterexample_to_text(const nlohmann::json& cex, std::ostringstream& out) {
  if (cex.is_null()) return;
  if (!cex.is_object() || cex.empty()) {
    out << "    counterexample: " << shorten(compact(cex)) << "\n";
    return;
  }
  bool reduced = cex.value("reduced", nlohmann::json(false)) == true;
  out << "    counterexample" << (reduced ? " (reduced sizes)" : "") << ":\n";
  // Inputs first, then what they produce: named tensors, other values, and
  // the per-element differences last (JSON objects arrive sorted by key).
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& [key, value] : cex.items()) {
      if (key == "reduced" && value.is_boolean()) continue;
      bool tensors = value.is_object() && !value.empty() &&
                     std::all_of(value.begin(), value.end(), is_tensor_value);
      bool rows = value.is_array() && !value.empty() &&
                  std::all_of(value.begin(), value.end(), [](const nlohmann::json& row) {
                    return row.is_object() && row.contains("element");
                  });
      int order = (tensors || is_tensor_value(value)) ? 0 : rows ? 2 : 1;
      if (order != pass) continue;
      if (tensors) {
        out << "      " << key << ":\n";
        for (const auto& [name, v] : value.items()) {
          out << "        " << name << " " << shorten(tensor_value_to_text(v)) << "\n";
        }
      } else if (rows) {
        out << "      " << key << ":\n";
        for (const auto& row : value) {
          std::string line = compact(row["element"]) + ":";
          bool first = true;
          for (const auto& [k, v] : row.items()) {
            if (k == "element") continue;
            line += (first ? " " : ", ") + k + " " +
                    (v.is_string() ? v.get<std::string>() : compact(v));
            first = false;
          }
          out << "        " << shorten(line) << "\n";
        }
      } else if (is_tensor_value(value)) {
        out << "      " << key << " " << shorten(tensor_value_to_text(value)) << "\n";
      } else {
        out << "      " << key << " = " << shorten(compact(value)) << "\n";
      }
    }
  }
}

std::string format_seconds(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", seconds);
  return buf;
}

std::string display_path(const Report& report) {
  if (!report.plan_path.empty()) return report.plan_path;
  if (!report.plan_name.empty()) return report.plan_name;
  return "<plan>";
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Equivalent:
      return "equivalent";
    case Verdict::NotEquivalent:
      return "not-equivalent";
    case Verdict::Invalid:
      return "invalid";
    case Verdict::Unknown:
      return "unknown";
    case Verdict::InternalError:
      return "internal-error";
  }
  return "internal-error";
}

int verdict_exit_code(Verdict v) {
  switch (v) {
    case Verdict::Equivalent:
      return 0;
    case Verdict::NotEquivalent:
      return 1;
    case Verdict::Invalid:
      return 2;
    case Verdict::Unknown:
      return 3;
    case Verdict::InternalError:
      return 4;
  }
  return 4;
}

int verdict_severity(Verdict v) {
  // A definite bug outranks "not decided": a batch with one mismatch and one
  // timeout must fail as not-equivalent, the actionable answer.
  switch (v) {
    case Verdict::Equivalent:
      return 0;
    case Verdict::Unknown:
      return 1;
    case Verdict::NotEquivalent:
      return 2;
    case Verdict::Invalid:
      return 3;
    case Verdict::InternalError:
      return 4;
  }
  return 4;
}

void add_also_failing(Finding& f, const std::vector<std::string>& names) {
  auto named = [](const std::vector<std::string>& list, const std::string& name) {
    return std::find(list.begin(), list.end(), name) != list.end();
  };
  for (const std::string& name : names)
    if (!named(f.parallel_tensors, name) && !named(f.also_failing, name))
      f.also_failing.push_back(name);
}

int64_t decided_total(const Stats& s) {
  return s.proven_trivially + s.solved + s.refuted_by_testing + s.symmetric + s.untried + s.cached +
         s.shared_proofs + s.reused;
}

void count_all_cached(Stats& s) {
  s.proven_trivially = s.solved = s.refuted_by_testing = s.symmetric = s.untried = s.reused =
      s.shared_proofs = 0;
  s.cached = s.unique_stages;
}

std::string distinct_breakdown(const Stats& s) {
  std::ostringstream out;
  out << s.unique_stages << " distinct: " << s.proven_trivially << " trivial, " << s.solved
      << " solved, ";
  if (s.refuted_by_testing > 0) out << s.refuted_by_testing << " refuted by testing, ";
  if (s.symmetric > 0) out << s.symmetric << " symmetric, ";
  if (s.untried > 0) out << s.untried << " untried, ";
  if (s.reused > 0) out << s.reused << " unchanged, ";
  if (s.shared_proofs > 0) out << s.shared_proofs << " shared proofs, ";
  out << s.cached << " cached";
  return out.str();
}

std::string report_headline(const Report& report) {
  std::ostringstream out;
  out << display_path(report) << ": " << verdict_title(report.verdict);
  if (report.verdict != Verdict::Invalid && report.verdict != Verdict::InternalError) {
    out << " (" << report.stats.stages << (report.stats.stages == 1 ? " stage, " : " stages, ")
        << distinct_breakdown(report.stats) << "; ";
    if (report.stats.class_anchors > 0)
      out << "per class at " << report.stats.class_anchors << " corners of "
          << report.stats.parallel_ops << " op instances, ";
    if (report.stats.inferred_claims > 0)
      out << report.stats.inferred_kept << " of " << report.stats.inferred_claims
          << " inferred claims kept, ";
    out << format_seconds(report.stats.seconds) << ")";
  }
  return out.str();
}

std::string invalid_text(const Diagnostic& d) {
  // Not a place in a plan (a harness the front end refused): file:line.
  if (d.pointer.empty() && d.column == 0 && d.line > 0)
    return d.file + ":" + std::to_string(d.line) + ": [" + d.rule + "] " + d.message;
  return d.to_string();
}

std::string report_to_text(const Report& report) {
  std::ostringstream out;
  out << report_headline(report) << "\n";

  if (report.verdict == Verdict::Invalid) {
    if (report.invalid) {
      out << "  " << invalid_text(*report.invalid) << "\n";
    } else if (!report.error.empty()) {
      out << "  " << report.error << "\n";
    }
  }
  if (report.verdict == Verdict::InternalError && !report.error.empty()) {
    out << "  " << report.error << "\n";
  }

  if (report.verdict == Verdict::Unknown && !report.stats.inference_skipped.empty())
    out << "  claims on intermediates were not inferred (" << report.stats.inference_skipped
        << "), so a stage spans the whole step: capture the program at smaller sizes, or "
           "claim its intermediates in the plan\n";
  for (const Finding& f : report.findings) out << finding_to_text(f);
  return out.str();
}

std::string also_failing_text(const Finding& f) {
  // A group bug on a large mesh fails at thousands of ranks: the first few
  // names, then a count (the JSON lists them all).
  constexpr size_t kShown = 6;
  const std::vector<std::string>& all = f.also_failing;
  if (all.size() <= kShown) return join(all, ", ");
  std::vector<std::string> first(all.begin(), all.begin() + kShown);
  return join(first, ", ") + " and " + std::to_string(all.size() - kShown) + " more";
}

std::string finding_to_text(const Finding& f) {
  std::ostringstream out;
  out << "  " << (f.kind.empty() ? "finding" : f.kind);
  if (!f.stage.empty()) out << " in " << f.stage;
  out << "\n";
  // A captured plan's finding starts where the user will look: their lines.
  for (size_t i = 0; i < f.sources.size(); ++i)
    out << (i == 0 ? "    at " : "       ") << source_to_string(f.sources[i]) << "\n";
  if (!f.tensor.empty()) out << "    logical tensor: " << f.tensor << "\n";
  if (!f.elements.empty()) out << "    elements: " << elements_to_text(f.elements) << "\n";
  if (!f.parallel_tensors.empty()) {
    out << "    parallel tensors: " << join(f.parallel_tensors, ", ") << "\n";
  }
  if (!f.also_failing.empty()) out << "    also failing: " << also_failing_text(f) << "\n";
  if (!f.ops.empty()) out << "    ops: " << join(f.ops, ", ") << "\n";
  counterexample_to_text(f.counterexample, out);
  if (!f.message.empty()) out << "    " << f.message << "\n";
  return out.str();
}

std::string finding_summary(const Finding& f) {
  std::string out = f.kind.empty() ? "finding" : f.kind;
  if (!f.stage.empty()) out += " in " + f.stage;
  std::vector<std::string> parts;
  if (!f.tensor.empty()) parts.push_back("logical tensor " + f.tensor);
  if (!f.elements.empty()) parts.push_back("elements " + elements_to_text(f.elements));
  if (!f.parallel_tensors.empty()) {
    parts.push_back("parallel tensors " + join(f.parallel_tensors, ", "));
  }
  if (!f.also_failing.empty()) parts.push_back("also failing " + also_failing_text(f));
  if (!f.ops.empty()) parts.push_back("ops " + join(f.ops, ", "));
  if (!f.sources.empty()) parts.push_back("at " + source_to_string(f.sources.front()));
  if (!parts.empty()) out += ": " + join(parts, "; ");
  if (!f.message.empty()) out += ". " + f.message;
  return out;
}

}  // namespace shardproof
