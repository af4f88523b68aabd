// Which plans a change affects: the plans among the changed files, the
// plans that reference a changed graph file, and the plans that the
// repository's regenerate rules produce from changed configs. Reads the
// files through a TreeReader: the index for the pre-commit hook, the
// working tree for CI.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hooks/repo_config.h"

namespace shardproof::hooks {

struct ChangedFile {
  std::string path;  // repository path
  bool deleted = false;
};

class TreeReader {
 public:
  virtual ~TreeReader() = default;
  // The contents of these repository paths; nullopt for a path not in the tree.
  virtual std::map<std::string, std::optional<std::string>> read(
      const std::vector<std::string>& paths) = 0;
  // The tree's .json files that may be plans (they name the format).
  virtual std::vector<std::string> plan_candidates() = 0;
  // The tree's .py files (torch harnesses are among them).
  virtual std::vector<std::string> python_files() { return {}; }
};

struct SelectedPlan {
  std::string path;                 // repository path
  std::string reason;               // "changed", or "references graphs/x.json"
  std::vector<std::string> graphs;  // repository paths of the graph files it references
  bool harness = false;             // a torch harness (.py), captured before it is verified
};

struct RegenerateJob {
  std::string config;   // the changed file that matched
  std::string command;  // placeholders filled in
  std::string plan;     // repository path of the plan the command writes
  bool in_worktree = false;
};

struct Selection {
  std::vector<SelectedPlan> plans;
  std::vector<RegenerateJob> jobs;
  bool empty() const { return plans.empty() && jobs.empty(); }
};

// Reads only what it must: nothing at all when no changed file is a .json
// file, a .py file or matches a regenerate rule, and the repository's other
// plans only when a changed .json file is not a plan (it may be a graph
// file). A configured harness is selected when it or a local file it
// imports changed (reason "changed" or "imports PATH").
Selection select_plans(const std::vector<ChangedFile>& changes, const RepoConfig& config,
                       TreeReader& tree);

}  // namespace shardproof::hooks
