#include "engine/decide/finding_sources.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace shardproof {
namespace {

bool has_sources(const Graph& g) {
  return std::any_of(g.ops.begin(), g.ops.end(), [](const Op& op) { return op.src != nullptr; });
}

// A stage names the ops it writes out from a collective "NAME (output j)"
// and its restricted logical ops "NAME over [...]": the plan's op is NAME.
std::string_view plan_op_name(std::string_view display) {
  for (std::string_view suffix : {" (output ", " over "})
    if (size_t p = display.find(suffix); p != std::string_view::npos) return display.substr(0, p);
  return display;
}

void add_distinct(std::vector<SourceRef>& out, const SourceRef& src) {
  for (const SourceRef& s : out)
    if (s.file == src.file && s.line == src.line && s.function == src.function) return;
  out.push_back(src);
}

}  // namespace

void attach_sources(const Plan& plan, Report& report) {
  if (report.findings.empty()) return;
  const bool parallel = has_sources(plan.parallel), logical = has_sources(plan.logical);
  if (!parallel && !logical) return;
  std::unordered_map<std::string, const Op*> by_name;
  for (const Op& op : plan.parallel.ops)
    if (op.src) by_name.emplace(op.display_name(), &op);
  for (Finding& f : report.findings) {
    f.sources.clear();
    for (const std::string& name : f.ops) {
      auto it = by_name.find(name);
      if (it == by_name.end()) it = by_name.find(std::string(plan_op_name(name)));
      if (it != by_name.end()) add_distinct(f.sources, *it->second->src);
    }
    // The logical tensor's producer: where the single-device program
    // computes what the claim compares with.
    const int t = plan.logical.find(f.tensor);
    if (t >= 0 && plan.logical.producer[t] >= 0)
      if (const auto& src = plan.logical.ops[plan.logical.producer[t]].src) add_distinct(f.sources, *src);
  }
}

}  // namespace shardproof
