// .shardproof.json, at the root of a repository whose plans the hooks
// check: plans to leave out, whether an undecided plan blocks, the
// settings of verify (a "verify" object, read by cli/settings.h), and the
// parallelization configs a plan is generated from (docs/integration.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace shardproof::hooks {

inline constexpr const char* kRepoConfigFile = ".shardproof.json";

// "When a staged file matches `configs`, run `command`, then verify `plan`."
struct RegenerateRule {
  std::vector<std::string> configs;  // glob patterns (hooks/glob.h)
  std::string command;               // run by /bin/sh -c at the root of the tree
  std::string plan;                  // the plan it writes, relative to the root
  bool in_worktree = false;          // run in the working tree, not a copy of the index
};

struct RepoConfig {
  std::vector<std::string> exclude;  // plans never verified (glob patterns)
  bool block_unknown = true;         // "unknown": "block" (default) or "warn"
  std::vector<RegenerateRule> regenerate;
  // Torch harnesses (glob patterns of .py files, docs/torch-harness.md):
  // each is captured and verified when it, or a local file it imports,
  // changes (hooks/python_imports.h).
  std::vector<std::string> harnesses;
};

// nullopt with `error` saying what is wrong (and where) when the text is
// not a valid configuration. Unknown keys are errors (a typo would
// otherwise silently switch a check off); keys starting with "//" are
// comments.
std::optional<RepoConfig> parse_repo_config(const std::string& text, std::string* error);

// A rule's command or plan with the placeholders filled in for one
// matching config: {config} (its repository path), {stem} (its file name
// without the last extension), {dir} (its directory, "." at the root),
// {plan} (the rule's plan, filled in). In commands the values are
// shell-quoted.
std::string expand_placeholders(const std::string& text, const std::string& config,
                                const std::string& plan, bool shell_quote);

}  // namespace shardproof::hooks
