// `verify --format github`: GitHub Actions workflow commands, which the
// runner turns into annotations on the plan's lines. Escaping as the Actions
// toolkit does it: data escapes % CR LF; properties also : and ,.
#include <string_view>

#include "cli/formats/report_formats.h"

namespace shardproof::cli {

namespace {

std::string escape(std::string_view s, bool property) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '%':
        out += "%25";
        break;
      case '\r':
        out += "%0D";
        break;
      case '\n':
        out += "%0A";
        break;
      case ':':
        out += property ? "%3A" : ":";
        break;
      case ',':
        out += property ? "%2C" : ",";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// "::error file=F,line=L,col=C,title=T::MESSAGE\n"
std::string command(const char* level, const SourceLocation& where, const std::string& title,
                    const std::string& message) {
  std::string out = std::string("::") + level + " file=" + escape(where.file, true);
  if (where.line > 0) out += ",line=" + std::to_string(where.line);
  if (where.column > 0) out += ",col=" + std::to_string(where.column);
  out += ",title=" + escape(title, true) + "::" + escape(message, false) + "\n";
  return out;
}

bool is_undecided(const Finding& f) {
  return f.kind == "unknown";
}

}  // namespace

std::string GithubAnnotations::annotate(const char* level, const SourceLocation& where,
                                        const std::string& title, const std::string& message) {
  if (shown_ < limit_) {
    ++shown_;
    return command(level, where, title, message);
  }
  // Past the limit the runner would drop it silently: the log keeps it.
  ++held_back_;
  std::string place = where.file;
  if (where.line > 0) place += ":" + std::to_string(where.line);
  return place + ": " + title + ": " + message + "\n";
}

std::string GithubAnnotations::render(const LocatedReport& located) {
  const Report& r = located.report;
  std::string out = report_headline(r) + "\n";
  size_t errors = 0, warnings = 0;
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    bool undecided = is_undecided(f);
    out += annotate(undecided ? "warning" : "error", located.findings[i],
                    undecided ? "shardproof: unknown" : "shardproof: not equivalent",
                    located_summary(located, i));
    ++(undecided ? warnings : errors);
  }
  switch (r.verdict) {
    case Verdict::Equivalent:
      break;
    case Verdict::Invalid: {
      std::string title = "shardproof: invalid plan";
      std::string message = r.error;
      if (r.invalid) {
        title += " [" + r.invalid->rule + "]";
        message = (r.invalid->pointer.empty() ? std::string("(root)") : r.invalid->pointer) + ": " +
                  r.invalid->message;
      }
      out += annotate("error", located.plan, title, message);
      break;
    }
    case Verdict::InternalError:
      out += annotate("error", located.plan, "shardproof: internal error", r.error);
      break;
    case Verdict::NotEquivalent:
      // Findings say where; without any, the plan itself still fails.
      if (errors == 0)
        out += annotate("error", located.plan, "shardproof: not equivalent",
                        "not equivalent, and no finding says where");
      break;
    case Verdict::Unknown:
      if (errors + warnings == 0)
        out += annotate("warning", located.plan, "shardproof: unknown",
                        r.error.empty() ? "some claims were not decided" : r.error);
      break;
  }
  return out;
}

std::string GithubAnnotations::finish() {
  if (held_back_ == 0) return "";
  std::string n = std::to_string(held_back_);
  std::string message = n + " more problem" + (held_back_ == 1 ? "" : "s") +
                        " not annotated (GitHub shows " + std::to_string(limit_) +
                        " annotations per step): see the lines above without \"::\"";
  held_back_ = 0;
  return "::notice title=" + escape("shardproof: " + n + " more", true) +
         "::" + escape(message, false) + "\n";
}

std::string render_github(const LocatedReport& report) {
  GithubAnnotations annotations;
  std::string out = annotations.render(report);
  return out + annotations.finish();
}

}  // namespace shardproof::cli
