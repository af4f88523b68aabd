#include "hooks/selection.h"

#include <algorithm>
#include <set>

#include "hooks/glob.h"
#include "hooks/plan_scan.h"
#include "hooks/python_imports.h"

namespace shardproof::hooks {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool matches_any(const std::vector<std::string>& patterns, const std::string& path) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const std::string& p) { return glob_match(p, path); });
}

std::vector<std::string> resolved_refs(const std::string& plan, const PlanHeader& header) {
  std::vector<std::string> out;
  for (const std::string& ref : header.graph_refs)
    if (std::optional<std::string> path = resolve_graph_ref(plan, ref)) out.push_back(*path);
  return out;
}

// The configured harnesses that a changed .py file is, or that import one.
void select_harnesses(const std::vector<ChangedFile>& changes, const RepoConfig& config,
                      TreeReader& tree, Selection& selection) {
  if (config.harnesses.empty()) return;
  std::set<std::string> changed;
  for (const ChangedFile& change : changes)
    if (ends_with(change.path, ".py")) changed.insert(change.path);
  if (changed.empty()) return;
  for (const std::string& harness : tree.python_files()) {
    if (!matches_any(config.harnesses, harness)) continue;
    if (changed.count(harness)) {
      selection.plans.push_back({harness, "changed", {}, true});
      continue;
    }
    for (const std::string& dep : harness_dependencies(harness, tree))
      if (changed.count(dep)) {
        selection.plans.push_back({harness, "imports " + dep, {}, true});
        break;
      }
  }
}

}  // namespace

Selection select_plans(const std::vector<ChangedFile>& changes, const RepoConfig& config,
                       TreeReader& tree) {
  Selection selection;

  std::set<std::pair<std::string, std::string>> seen_jobs;
  for (const RegenerateRule& rule : config.regenerate) {
    for (const ChangedFile& change : changes) {
      if (change.deleted || !matches_any(rule.configs, change.path)) continue;
      RegenerateJob job;
      job.config = change.path;
      job.plan = expand_placeholders(rule.plan, change.path, "", false);
      job.command = expand_placeholders(rule.command, change.path, job.plan, true);
      job.in_worktree = rule.in_worktree;
      if (seen_jobs.insert({job.command, job.plan}).second) selection.jobs.push_back(job);
    }
  }

  std::vector<std::string> present;
  std::set<std::string> graphs;  // changed .json files that are not plans
  for (const ChangedFile& change : changes) {
    if (!ends_with(change.path, ".json") || change.path == kRepoConfigFile) continue;
    if (change.deleted)
      graphs.insert(change.path);
    else
      present.push_back(change.path);
  }
  std::set<std::string> selected;
  if (!present.empty()) {
    for (auto& [path, text] : tree.read(present)) {
      if (!text) continue;  // gone from the tree after all
      PlanHeader header = scan_plan_header(*text);
      if (header.is_plan) {
        selection.plans.push_back({path, "changed", resolved_refs(path, header)});
        selected.insert(path);
      } else {
        graphs.insert(path);
      }
    }
  }

  if (!graphs.empty()) {
    std::vector<std::string> candidates;
    for (std::string& path : tree.plan_candidates())
      if (!selected.count(path)) candidates.push_back(std::move(path));
    for (auto& [path, text] : tree.read(candidates)) {
      if (!text) continue;
      PlanHeader header = scan_plan_header(*text);
      if (!header.is_plan) continue;
      std::vector<std::string> refs = resolved_refs(path, header);
      auto hit = std::find_if(refs.begin(), refs.end(),
                              [&](const std::string& r) { return graphs.count(r) > 0; });
      if (hit == refs.end()) continue;
      selection.plans.push_back({path, "references " + *hit, refs});
    }
  }

  select_harnesses(changes, config, tree, selection);

  std::erase_if(selection.plans,
                [&](const SelectedPlan& p) { return matches_any(config.exclude, p.path); });
  std::sort(selection.plans.begin(), selection.plans.end(),
            [](const SelectedPlan& a, const SelectedPlan& b) { return a.path < b.path; });
  return selection;
}

}  // namespace shardproof::hooks
