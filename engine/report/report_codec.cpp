#include "engine/report/report_codec.h"

namespace shardproof {
namespace {

using nlohmann::json;

std::optional<Verdict> verdict_from_name(const std::string& name) {
  for (Verdict v : {Verdict::Equivalent, Verdict::NotEquivalent, Verdict::Invalid, Verdict::Unknown,
                    Verdict::InternalError})
    if (name == verdict_name(v)) return v;
  return std::nullopt;
}

Finding finding_from_json(const json& j) {
  Finding f;
  f.kind = j.at("kind").get<std::string>();
  f.stage = j.at("stage").get<std::string>();
  f.tensor = j.at("tensor").get<std::string>();
  f.parallel_tensors = j.at("parallel_tensors").get<std::vector<std::string>>();
  if (const auto also = j.find("also_failing"); also != j.end())
    f.also_failing = also->get<std::vector<std::string>>();
  f.elements = j.at("elements").get<std::vector<std::vector<int64_t>>>();
  f.ops = j.at("ops").get<std::vector<std::string>>();
  f.counterexample = j.at("counterexample");
  f.message = j.at("message").get<std::string>();
  if (const auto sources = j.find("sources"); sources != j.end())
    for (const json& s : *sources)
      f.sources.push_back({s.at("file").get<std::string>(), s.at("line").get<int64_t>(),
                           s.value("function", std::string())});
  return f;
}

Stats stats_from_json(const json& j) {
  Stats s;
  s.stages = j.at("stages").get<int64_t>();
  s.unique_stages = j.at("unique_stages").get<int64_t>();
  s.proven_trivially = j.at("proven_trivially").get<int64_t>();
  s.solved = j.at("solved").get<int64_t>();
  s.refuted_by_testing = j.value("refuted_by_testing", int64_t{0});
  s.symmetric = j.value("symmetric", int64_t{0});
  s.untried = j.value("untried", int64_t{0});
  s.cached = j.value("cached", int64_t{0});
  s.shared_proofs = j.value("shared_proofs", int64_t{0});
  s.reused = j.value("reused", int64_t{0});
  s.logical_ops = j.at("logical_ops").get<int64_t>();
  s.parallel_ops = j.at("parallel_ops").get<int64_t>();
  s.class_anchors = j.value("class_anchors", int64_t{0});
  s.inferred_claims = j.value("inferred_claims", int64_t{0});
  s.inferred_kept = j.value("inferred_kept", int64_t{0});
  s.inference_skipped = j.value("inference_skipped", std::string());
  s.seconds = j.at("seconds").get<double>();
  if (const auto p = j.find("phases"); p != j.end() && p->is_object()) {
    s.phases.parse = p->value("parse", 0.0);
    s.phases.infer = p->value("infer", 0.0);
    s.phases.cut = p->value("cut", 0.0);
    s.phases.key = p->value("key", 0.0);
    s.phases.decide = p->value("decide", 0.0);
  }
  return s;
}

}  // namespace

nlohmann::json report_to_json(const Report& report) {
  using nlohmann::json;
  json j = json::object();
  j["verdict"] = verdict_name(report.verdict);
  j["plan"] = report.plan_path;
  j["name"] = report.plan_name;
  j["meta"] = report.meta.is_null() ? json::object() : report.meta;

  json findings = json::array();
  for (const Finding& f : report.findings) {
    json elements = json::array();
    for (const auto& e : f.elements) elements.push_back(e);
    findings.push_back({{"kind", f.kind},
                        {"stage", f.stage},
                        {"tensor", f.tensor},
                        {"parallel_tensors", f.parallel_tensors},
                        {"elements", std::move(elements)},
                        {"ops", f.ops},
                        {"counterexample", f.counterexample},
                        {"message", f.message}});
    // Only findings at several places have it: the others keep their JSON.
    if (!f.also_failing.empty()) findings.back()["also_failing"] = f.also_failing;
    // Only captured plans have sources: other reports keep their JSON.
    if (!f.sources.empty()) {
      json sources = json::array();
      for (const SourceRef& s : f.sources)
        sources.push_back({{"file", s.file}, {"line", s.line}, {"function", s.function}});
      findings.back()["sources"] = std::move(sources);
    }
  }
  j["findings"] = std::move(findings);

  j["stats"] = {{"stages", report.stats.stages},
                {"unique_stages", report.stats.unique_stages},
                {"proven_trivially", report.stats.proven_trivially},
                {"solved", report.stats.solved},
                {"refuted_by_testing", report.stats.refuted_by_testing},
                {"symmetric", report.stats.symmetric},
                {"untried", report.stats.untried},
                {"cached", report.stats.cached},
                {"shared_proofs", report.stats.shared_proofs},
                {"reused", report.stats.reused},
                {"logical_ops", report.stats.logical_ops},
                {"parallel_ops", report.stats.parallel_ops},
                {"class_anchors", report.stats.class_anchors},
                {"inferred_claims", report.stats.inferred_claims},
                {"inferred_kept", report.stats.inferred_kept},
                {"seconds", report.stats.seconds},
                {"phases",
                 {{"parse", report.stats.phases.parse},
                  {"infer", report.stats.phases.infer},
                  {"cut", report.stats.phases.cut},
                  {"key", report.stats.phases.key},
                  {"decide", report.stats.phases.decide}}}};
  if (!report.stats.inference_skipped.empty())
    j["stats"]["inference_skipped"] = report.stats.inference_skipped;

  if (report.verdict == Verdict::Invalid) {
    json error = json::object();
    if (report.invalid) {
      const Diagnostic& d = *report.invalid;
      error = {{"rule", d.rule}, {"file", d.file},     {"pointer", d.pointer},
               {"line", d.line}, {"column", d.column}, {"message", d.message}};
    } else {
      // An Invalid report without a Diagnostic is an engine slip; still say why.
      error = {{"rule", ""},  {"file", report.plan_path}, {"pointer", ""}, {"line", 0},
               {"column", 0}, {"message", report.error}};
    }
    j["error"] = std::move(error);
  } else if (report.verdict == Verdict::InternalError) {
    j["error"] = {{"rule", "internal"}, {"file", report.plan_path}, {"message", report.error}};
  }
  return j;
}

std::optional<Report> report_from_json(const json& j) {
  try {
    Report r;
    std::optional<Verdict> verdict = verdict_from_name(j.at("verdict").get<std::string>());
    if (!verdict) return std::nullopt;
    r.verdict = *verdict;
    r.plan_path = j.at("plan").get<std::string>();
    r.plan_name = j.at("name").get<std::string>();
    r.meta = j.at("meta");
    for (const json& f : j.at("findings")) r.findings.push_back(finding_from_json(f));
    r.stats = stats_from_json(j.at("stats"));
    if (r.verdict == Verdict::Invalid) {
      const json& e = j.at("error");
      Diagnostic d{e.at("rule").get<std::string>(),    e.at("file").get<std::string>(),
                   e.at("pointer").get<std::string>(), e.at("line").get<int>(),
                   e.at("column").get<int>(),          e.at("message").get<std::string>()};
      // report_to_json writes an engine slip (Invalid without a diagnostic)
      // with an empty rule: keep it a plain error so it renders the same.
      if (d.rule.empty() && d.pointer.empty() && d.line == 0)
        r.error = d.message;
      else
        r.invalid = d;
    } else if (r.verdict == Verdict::InternalError) {
      r.error = j.at("error").at("message").get<std::string>();
    }
    return r;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace shardproof
