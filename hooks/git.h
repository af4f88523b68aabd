// The git repository the hooks work on, through the `git` program (no
// library): where it is, what is staged, and the index's contents. Runs
// git with the environment it was given, so inside a hook it reads the
// index git is committing (GIT_INDEX_FILE for `git commit -a` or
// `git commit PATH`).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hooks/process.h"
#include "hooks/selection.h"

namespace shardproof::hooks {

// git failed, or this is not a repository; the message says which.
class GitError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class NotARepository : public GitError {
 public:
  using GitError::GitError;
};

class Git {
 public:
  // The repository of the current directory.
  static Git open();

  const std::string& top() const { return top_; }        // absolute worktree root
  const std::string& prefix() const { return prefix_; }  // cwd below top: "" or "sub/dir/"

  // A path given on the command line (relative to the current directory)
  // as a repository path; nullopt when it is outside the worktree.
  std::optional<std::string> repo_path(const std::string& arg) const;
  // A repository path as a path from the current directory.
  std::string display_path(const std::string& repo_path) const;

  // What the index changes relative to HEAD (every path when there is no
  // commit yet). Renames are a deletion and an addition.
  std::vector<ChangedFile> staged_changes();
  // What HEAD changes relative to its merge base with `ref` (a pull
  // request's changes: ref is its base branch).
  std::vector<ChangedFile> changes_since(const std::string& ref);
  // Where hooks live: core.hooksPath when set, else .git/hooks (absolute).
  std::string hooks_dir();
  // Contents of index entries (stage 0); nullopt for paths not in it.
  std::map<std::string, std::optional<std::string>> read_index(
      const std::vector<std::string>& paths);
  // Tracked .json files that name the plan format, in the index or in the
  // working tree.
  std::vector<std::string> grep_plans(bool in_index);
  // Tracked .py files (the index's entries).
  std::vector<std::string> python_files();
  // Writes every index entry under `dir` (which must end in '/').
  void checkout_index(const std::string& dir);
  // Whether the working tree holds exactly what the index holds for these paths.
  bool worktree_matches_index(const std::vector<std::string>& paths);

 private:
  ProcessResult git(std::vector<std::string> args, ProcessOptions options = {}) const;
  ProcessResult git_ok(std::vector<std::string> args, ProcessOptions options = {}) const;
  std::vector<ChangedFile> diff(std::vector<std::string> args);

  std::string top_;
  std::string prefix_;
};

class IndexReader : public TreeReader {
 public:
  explicit IndexReader(Git& git) : git_(git) {}
  std::map<std::string, std::optional<std::string>> read(
      const std::vector<std::string>& paths) override {
    return git_.read_index(paths);
  }
  std::vector<std::string> plan_candidates() override { return git_.grep_plans(true); }
  std::vector<std::string> python_files() override { return git_.python_files(); }

 private:
  Git& git_;
};

class WorktreeReader : public TreeReader {
 public:
  explicit WorktreeReader(Git& git) : git_(git) {}
  std::map<std::string, std::optional<std::string>> read(
      const std::vector<std::string>& paths) override;
  std::vector<std::string> plan_candidates() override { return git_.grep_plans(false); }
  std::vector<std::string> python_files() override { return git_.python_files(); }

 private:
  Git& git_;
};

}  // namespace shardproof::hooks
