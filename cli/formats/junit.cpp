// `verify --format junit`: JUnit XML, as CI systems read test results. Each
// plan is a <testsuite>: one test case for the plan's verdict ("equivalence")
// and one per stage that failed. A false claim or an undecided one is a
// failure; an invalid plan or an internal error is an error.
#include <cstdio>
#include <map>
#include <string_view>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

// The length of the UTF-8 sequence at s[i] and its code point; 0 when the
// bytes there are not valid UTF-8 (overlong, surrogate, truncated, > U+10FFFF).
size_t decode_utf8(std::string_view s, size_t i, char32_t* cp) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = byte(i);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  char32_t c = len == 1 ? b : b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    c = (c << 6) | (byte(i + k) & 0x3F);
  }
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  *cp = c;
  return len;
}

// The characters XML 1.0 allows in a document.
bool xml_char(char32_t c) {
  return c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) ||
         (c >= 0xE000 && c <= 0xFFFD) || (c >= 0x10000 && c <= 0x10FFFF);
}

std::string attr(const char* name, std::string_view value) {
  return std::string(" ") + name + "=\"" + xml_escape(value, true) + "\"";
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s < 0 ? 0.0 : s);
  return buf;
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

struct TestCase {
  std::string name;
  std::string outcome;  // "", "failure" or "error"
  std::string type;     // the verdict or the finding's kind
  std::string message;  // one line
  std::string body;     // the details
  double time = 0;
  // A captured plan's finding: the user's line (the testcase's file and
  // line attributes, which CI test reporters annotate); empty otherwise.
  std::string file;
  int64_t line = 0;
};

struct Counts {
  size_t tests = 0, failures = 0, errors = 0;
  void add(const TestCase& c) {
    ++tests;
    failures += c.outcome == "failure";
    errors += c.outcome == "error";
  }
};

// A stage's findings, in report order; a finding without a stage is named
// by its kind.
std::vector<TestCase> stage_cases(const LocatedReport& located) {
  const Report& r = located.report;
  std::vector<TestCase> cases;
  std::map<std::string, size_t> by_name;
  std::vector<size_t> findings_in;
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    std::string name = !f.stage.empty() ? f.stage : !f.kind.empty() ? f.kind : "finding";
    auto [it, added] = by_name.emplace(name, cases.size());
    if (added) {
      TestCase c;
      c.name = name;
      c.outcome = "failure";
      c.type = f.kind.empty() ? "finding" : f.kind;
      c.message = located_summary(located, i);
      if (!f.sources.empty()) c.file = f.sources.front().file, c.line = f.sources.front().line;
      cases.push_back(c);
      findings_in.push_back(0);
    }
    cases[it->second].body += finding_to_text(f);
    ++findings_in[it->second];
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    if (findings_in[i] > 1)
      cases[i].message += " (+" + plural(findings_in[i] - 1, "more finding)", "more findings)");
  }
  return cases;
}

TestCase verdict_case(const Report& r, size_t failed_stages) {
  TestCase c;
  c.name = "equivalence";
  c.type = verdict_name(r.verdict);
  c.time = r.stats.seconds;
  // The findings in full are in the stages' cases: here one line each.
  c.body = report_headline(r) + "\n";
  for (const Finding& f : r.findings) c.body += "  " + finding_summary(f) + "\n";
  if (r.verdict == Verdict::Invalid || r.verdict == Verdict::InternalError)
    c.body = report_to_text(r);
  std::string counted = plural(r.findings.size(), "finding", "findings") + " in " +
                        plural(failed_stages, "stage", "stages");
  switch (r.verdict) {
    case Verdict::Equivalent:
      break;
    case Verdict::NotEquivalent:
      c.outcome = "failure";
      c.message = "not equivalent: " + counted;
      break;
    case Verdict::Unknown:
      c.outcome = "failure";
      c.message = "unknown: not every claim was decided (" + counted + ")";
      break;
    case Verdict::Invalid:
      c.outcome = "error";
      c.message = "invalid plan: " + (r.invalid ? r.invalid->to_string() : r.error);
      break;
    case Verdict::InternalError:
      c.outcome = "error";
      c.message = "internal error: " + r.error;
      break;
  }
  return c;
}

std::string case_xml(const std::string& classname, const TestCase& c) {
  std::string out = "    <testcase" + attr("classname", classname) + attr("name", c.name) +
                    attr("time", seconds(c.time));
  if (!c.file.empty()) out += attr("file", c.file) + attr("line", std::to_string(c.line));
  if (c.outcome.empty()) return out + "/>\n";
  out += ">\n      <" + c.outcome + attr("message", c.message) + attr("type", c.type) + ">" +
         xml_escape(c.body, false) + "</" + c.outcome + ">\n";
  return out + "    </testcase>\n";
}

}  // namespace

std::string xml_escape(std::string_view s, bool attribute) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = 0;
    size_t len = decode_utf8(s, i, &c);
    if (len == 0 || !xml_char(c)) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += len == 0 ? 1 : len;
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += attribute ? "&quot;" : "\"";
        break;
      case '\r':
        out += "&#13;";
        break;
      case '\n':
        out += attribute ? "&#10;" : "\n";
        break;
      case '\t':
        out += attribute ? "&#9;" : "\t";
        break;
      default:
        out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string render_junit(const std::vector<LocatedReport>& reports) {
  Counts total;
  double total_time = 0;
  std::string suites;
  for (const LocatedReport& located : reports) {
    const Report& r = located.report;
    std::vector<TestCase> cases = stage_cases(located);
    cases.insert(cases.begin(), verdict_case(r, cases.size()));
    Counts counts;
    for (const TestCase& c : cases) counts.add(c);
    total.tests += counts.tests;
    total.failures += counts.failures;
    total.errors += counts.errors;
    total_time += r.stats.seconds;
    const std::string& plan = r.plan_path.empty() ? located.plan.file : r.plan_path;
    suites += "  <testsuite" + attr("name", plan) + attr("tests", std::to_string(counts.tests)) +
              attr("failures", std::to_string(counts.failures)) +
              attr("errors", std::to_string(counts.errors)) + attr("skipped", "0") +
              attr("time", seconds(r.stats.seconds)) + ">\n";
    suites += "    <properties>\n      <property" + attr("name", "verdict") +
              attr("value", verdict_name(r.verdict)) + "/>\n      <property" +
              attr("name", "plan-name") + attr("value", r.plan_name) + "/>\n    </properties>\n";
    for (const TestCase& c : cases) suites += case_xml(plan, c);
    suites += "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites" +
         attr("name", "shardproof verify") + attr("tests", std::to_string(total.tests)) +
         attr("failures", std::to_string(total.failures)) +
         attr("errors", std::to_string(total.errors)) + attr("time", seconds(total_time)) + ">\n" +
         suites + "</testsuites>\n";
}

}  // namespace shardproof::cli
