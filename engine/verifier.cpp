#include "engine/verifier.h"

#include <chrono>
#include <exception>

#include "engine/classes/class_verifier.h"
#include "engine/infer/hinted_verify.h"
#include "engine/schedule/schedule_verdict.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

// The graphs' verdict, then the schedule's (a deadlock is a finding).
Report with_schedule(const Plan& plan, Report report) {
  schedule::add_schedule_verdict(plan.schedule_json, report);
  return report;
}

bool infers_claims(const Plan& plan, ClaimInference mode) {
  if (mode == ClaimInference::Off) return false;
  if (mode == ClaimInference::On) return true;
  for (const Op& op : plan.parallel.ops)
    if (op.src) return true;
  return false;
}

Report verify_expanded_plan(const Plan& plan, const VerifyOptions& options, StageRecord* record) {
  if (infers_claims(plan, options.infer_claims))
    return infer::verify_with_inferred_claims(plan, options, record);
  return verify_expanded(plan, options, record);
}

}  // namespace

Report verify_plan(const Plan& plan, const VerifyOptions& options) {
  if (plan.compact) return with_schedule(plan, verify_by_classes(plan, options));
  return with_schedule(plan, verify_expanded_plan(plan, options, nullptr));
}

Report verify_plan(const Plan& plan, const VerifyOptions& options, StageRecord& record) {
  if (plan.compact) {
    record = StageRecord{};
    return with_schedule(plan, verify_by_classes(plan, options));
  }
  return with_schedule(plan, verify_expanded_plan(plan, options, &record));
}

Report verify_plan_edit(const Plan& plan, const OpEdits& edits, const VerifyOptions& options,
                        StageRecord& record) {
  if (record.units.empty() || record.stages.size() != record.units.size())
    return verify_plan(plan, options, record);
  return with_schedule(plan, verify_expanded_edit(plan, edits, options, record));
}

namespace {

// The report of `parsed`, read since `start`.
Report verify_parsed(const std::string& path, const ParseResult& parsed, Clock::time_point start,
                     const VerifyOptions& options) {
  if (!parsed.plan) return unreadable_plan_report(path, parsed);
  const double parse = std::chrono::duration<double>(Clock::now() - start).count();
  Report report = verify_plan(*parsed.plan, options);
  report.plan_path = path;
  add_parse_time(report, parse);
  return report;
}

}  // namespace

void add_parse_time(Report& report, double parse_seconds) {
  report.stats.phases.parse += parse_seconds;
  report.stats.seconds += parse_seconds;
}

Report verify_plan_file(const std::string& path, const VerifyOptions& options) {
  auto start = Clock::now();
  ParseResult parsed;
  try {
    parsed = parse_plan_file(path, options.parse);
  } catch (const std::exception& e) {
    parsed.io_error = std::string("unexpected error while reading the plan: ") + e.what();
  }
  return verify_parsed(path, parsed, start, options);
}

Report verify_plan_text(const std::string& path, const std::string& text,
                        const std::string& base_dir, const VerifyOptions& options) {
  auto start = Clock::now();
  return verify_parsed(path, parse_plan_text(text, path, base_dir, options.parse), start, options);
}

Report unreadable_plan_report(const std::string& path, const ParseResult& parsed) {
  Report report;
  report.plan_path = path;
  if (parsed.error) {
    report.verdict = Verdict::Invalid;
    report.invalid = parsed.error;
  } else {
    report.verdict = Verdict::InternalError;
    report.error = parsed.io_error.empty() ? "the plan could not be read" : parsed.io_error;
  }
  return report;
}

}  // namespace shardproof
