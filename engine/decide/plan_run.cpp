#include "engine/decide/plan_run.h"

#include <algorithm>
#include <chrono>

#include "engine/core/parallel_for.h"
#include "engine/decide/finding_sources.h"
#include "engine/decide/plan_run_cut.h"
#include "engine/decide/stage_run.h"
#include "engine/stage/stage.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

// The report's fields that come from the plan itself.
Report plan_report(const Plan& plan) {
  Report report;
  report.plan_path = plan.path;
  report.plan_name = plan.name;
  report.meta =
      nlohmann::json::parse(plan.meta_json.empty() ? "{}" : plan.meta_json, nullptr, false);
  if (report.meta.is_discarded()) report.meta = nlohmann::json::object();
  report.stats.logical_ops = static_cast<int64_t>(plan.logical.ops.size());
  report.stats.parallel_ops = static_cast<int64_t>(plan.parallel.ops.size());
  return report;
}

// Runs the stages and keeps what a later edit can reuse in `record` (if any):
// each stage's identity, and its outcome when definite.
void run_stages(const Plan& plan, const std::vector<StageUnit>& units, const VerifyOptions& options,
                std::vector<std::optional<ReusedStage>> reuse, StageRecord* record,
                Report& report) {
  report.stats.stages = static_cast<int64_t>(units.size());
  DecidedStages run = decide_stages(plan, units, options, std::move(reuse), report);
  attach_sources(plan, report);
  if (!record) return;
  record->decided = std::move(run.decided);
  record->stages.assign(units.size(), std::nullopt);
  record->verdict_keys.assign(units.size(), std::string());
  for (size_t i = 0; i < units.size(); ++i) {
    record->verdict_keys[i] = run.identities[i].verdict;
    StageOutcome& o = run.outcomes[i];
    if (o.status == StageStatus::Proven || o.status == StageStatus::Refuted)
      record->stages[i] = ReusedStage{std::move(run.identities[i]), std::move(o)};
  }
}

}  // namespace

const char* claim_inference_name(ClaimInference mode) {
  switch (mode) {
    case ClaimInference::On:
      return "on";
    case ClaimInference::Off:
      return "off";
    case ClaimInference::Auto:
      break;
  }
  return "auto";
}

std::optional<ClaimInference> parse_claim_inference(const std::string& name) {
  for (ClaimInference mode : {ClaimInference::Auto, ClaimInference::On, ClaimInference::Off})
    if (name == claim_inference_name(mode)) return mode;
  return std::nullopt;
}

Report verify_expanded(const Plan& plan, const VerifyOptions& options, StageRecord* record) {
  auto start = Clock::now();
  std::vector<StageUnit> units;
  try {
    units = cut_units(plan, options.jobs);
  } catch (const std::exception& e) {
    Report report = plan_report(plan);
    report.verdict = Verdict::InternalError;
    report.error = e.what();
    if (record) *record = StageRecord{};
    return report;
  }
  const double cut = std::chrono::duration<double>(Clock::now() - start).count();
  return verify_expanded_cut(plan, std::move(units), cut, options, record);
}

Report verify_expanded_cut(const Plan& plan, std::vector<StageUnit> units, double cut_seconds,
                           const VerifyOptions& options, StageRecord* record) {
  auto start = Clock::now();
  Report report = plan_report(plan);
  report.stats.phases.cut = cut_seconds;
  try {
    run_stages(plan, units, options, {}, record, report);
    if (record) record->units = std::move(units);
  } catch (const std::exception& e) {
    report.verdict = Verdict::InternalError;
    report.error = e.what();
    if (record) *record = StageRecord{};
  }
  report.stats.seconds = cut_seconds + std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

Report verify_expanded_edit(const Plan& plan, const OpEdits& edits, const VerifyOptions& options,
                            StageRecord& record) {
  auto start = Clock::now();
  Report report = plan_report(plan);
  try {
    std::vector<char> logical_edit(plan.logical.ops.size(), 0);
    std::vector<char> parallel_edit(plan.parallel.ops.size(), 0);
    for (int op : edits.logical) logical_edit.at(static_cast<size_t>(op)) = 1;
    for (int op : edits.parallel) parallel_edit.at(static_cast<size_t>(op)) = 1;
    auto touches = [](const std::vector<int>& cone, const std::vector<char>& edited) {
      return std::any_of(cone.begin(), cone.end(),
                         [&](int op) { return edited[static_cast<size_t>(op)] != 0; });
    };
    // A stage is the same stage when no op of its cones was edited
    // (StageUnit); only a definite outcome is carried over.
    std::vector<std::optional<ReusedStage>> reuse = std::move(record.stages);
    std::vector<size_t> recut;
    for (size_t i = 0; i < record.units.size(); ++i) {
      const StageUnit& u = record.units[i];
      if (touches(u.logical_cone, logical_edit) || touches(u.restricted, logical_edit) ||
          touches(u.parallel_cone, parallel_edit))
        reuse[i].reset();
      if (!reuse[i]) recut.push_back(i);
    }
    parallel_for(options.jobs, recut.size(),
                 [&](size_t k) { cut_cones(plan, record.units[recut[k]]); });
    report.stats.phases.cut = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<StageUnit> units = std::move(record.units);
    run_stages(plan, units, options, std::move(reuse), &record, report);
    record.units = std::move(units);
  } catch (const std::exception& e) {
    report.verdict = Verdict::InternalError;
    report.error = e.what();
    record = StageRecord{};
  }
  report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace shardproof
