#include "engine/schedule/schedule_verdict.h"

#include <nlohmann/json.hpp>

namespace shardproof::schedule {

std::vector<RankSchedule> schedule_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  std::vector<RankSchedule> ranks;
  for (const nlohmann::json& steps : j.at("ranks")) {
    RankSchedule& rank = ranks.emplace_back();
    for (const nlohmann::json& step : steps) {
      Step& s = rank.emplace_back();
      for (const nlohmann::json& op : step) {
        const bool send = op.contains("send");
        s.push_back({send, op.at(send ? "send" : "recv").get<int>(), op.at("tensor")});
      }
    }
  }
  return ranks;
}

void add_schedule_verdict(const std::string& schedule_json, Report& report) {
  if (schedule_json.empty()) return;
  if (report.verdict != Verdict::Equivalent && report.verdict != Verdict::NotEquivalent &&
      report.verdict != Verdict::Unknown)
    return;
  const ScheduleVerdict v = check_schedule(schedule_from_json(schedule_json));
  if (v.kind == ScheduleVerdict::Kind::Ok) return;
  Finding f;
  f.kind = "schedule";
  f.stage = "pipeline schedule";
  f.tensor = "schedule";
  f.message = v.message;
  if (v.kind == ScheduleVerdict::Kind::Deadlock) {
    f.message = "the pipeline schedule deadlocks; waiting ranks:";
    for (int r : v.cycle) f.message += " " + std::to_string(r) + " ->";
    f.message += " " + std::to_string(v.cycle.front()) + " (" + v.message + ")";
  }
  f.counterexample = {{"cycle", v.cycle}};
  report.findings.push_back(std::move(f));
  report.verdict = Verdict::NotEquivalent;
}

}  // namespace shardproof::schedule
