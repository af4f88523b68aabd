#include "engine/plan_memo.h"

#include <chrono>

#include "engine/format/plan_parser.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Report verify_text_with_memo(const std::string& path, std::string text,
                             const VerifyOptions& options, PlanMemo& memo) {
  auto start = Clock::now();
  if (memo.parsed) {
    if (std::optional<OpEdits> edits = reread_edited(*memo.parsed, text)) {
      const double parse = seconds_since(start);
      memo.parsed->plan.path = path;
      Report report = verify_plan_edit(memo.parsed->plan, *edits, options, memo.stages);
      add_parse_time(report, parse);
      return report;
    }
  }
  memo.clear();
  ParseResult parsed = parse_plan_text(text, path, "", options.parse);
  if (!parsed.plan) return unreadable_plan_report(path, parsed);
  const double parse = seconds_since(start);
  Report report = verify_plan(*parsed.plan, options, memo.stages);
  add_parse_time(report, parse);
  report.plan_path = path;
  memo.parsed = keep_parsed_text(std::move(text), std::move(*parsed.plan));
  if (!memo.parsed) memo.clear();
  return report;
}

}  // namespace shardproof
