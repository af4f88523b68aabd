// `shardproof hooks install|uninstall|run|affected`: the git pre-commit
// hook and its CI counterpart (docs/integration.md). `run` lives in
// cli/hooks_run.cpp; the git and file work in hooks/.
#include <limits.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "cli/hooks_command.h"
#include "cli/settings.h"
#include "hooks/git.h"
#include "hooks/install.h"
#include "hooks/regenerate.h"
#include "hooks/selection.h"

namespace shardproof::cli {
namespace {

namespace fs = std::filesystem;

int fail(const std::string& message, int code) {
  std::cerr << "shardproof hooks: " << message << "\n";
  return code;
}

// The running binary, so the hook runs this shardproof even when it is not
// on PATH (the hook falls back to PATH when it is gone).
std::string this_executable() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

int install(bool remove) {
  hooks::Git git = hooks::Git::open();
  std::string dir = git.hooks_dir();
  std::string message;
  // Under the pre-commit framework our hook is one of its hooks, not a
  // chained git hook: say how, change nothing.
  const fs::path framework = fs::path(git.top()) / hooks::kPreCommitFrameworkConfig;
  std::error_code ec;
  if (!remove && fs::exists(framework, ec)) {
    std::ifstream in(framework, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    std::cout << hooks::pre_commit_framework_advice(text.str(), SHARDPROOF_VERSION) << "\n";
    return kExitOk;
  }
  Status s = remove ? hooks::uninstall_hook(dir, &message)
                    : hooks::install_hook(dir, this_executable(), &message);
  if (!s.ok()) return fail(s.message(), kExitUsage);
  std::cout << message << "\n";
  return kExitOk;
}

// Prints the plans that the given changes affect, one per line, from the
// working tree; regenerate rules run there (CI: the checkout is the tree).
int affected(const HooksArgs& args) {
  hooks::Git git = hooks::Git::open();
  std::vector<hooks::ChangedFile> changes;
  if (!args.base.empty()) changes = git.changes_since(args.base);
  for (const std::string& f : args.files) {
    std::optional<std::string> path = git.repo_path(f);
    if (!path) return fail(f + " is outside the repository " + git.top(), kExitUsage);
    std::error_code ec;
    changes.push_back({*path, !fs::exists(fs::path(git.top()) / *path, ec)});
  }
  if (changes.empty()) return kExitOk;

  hooks::WorktreeReader worktree(git);
  std::optional<hooks::RepoConfig> config =
      load_repo_config(worktree.read({hooks::kRepoConfigFile})[hooks::kRepoConfigFile]);
  if (!config) return kExitUsage;
  hooks::Selection selection = hooks::select_plans(changes, *config, worktree);

  std::set<std::string> printed;
  auto print = [&](const std::string& path) {
    if (printed.insert(path).second) std::cout << git.display_path(path) << "\n";
  };
  for (const hooks::SelectedPlan& plan : selection.plans) print(plan.path);
  int code = kExitOk;
  for (const hooks::RegenerateJob& job : selection.jobs) {
    hooks::RegenerateOutcome outcome = hooks::regenerate(job, git.top(), git.top(), false);
    if (!outcome.ok) {
      std::cerr << "shardproof hooks: " << git.display_path(job.config) << ": " << outcome.problem
                << "\n";
      code = kExitUsage;
      continue;
    }
    print(job.plan);
  }
  std::cout.flush();
  return std::cout ? code : kExitInternal;
}

}  // namespace

std::optional<hooks::RepoConfig> load_repo_config(const std::optional<std::string>& text) {
  if (!text) return hooks::RepoConfig{};
  std::string error;
  std::optional<hooks::RepoConfig> config = hooks::parse_repo_config(*text, &error);
  if (!config) std::cerr << "shardproof hooks: " << error << "\n";
  return config;
}

CLI::App* add_hooks_command(CLI::App& app, HooksArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "hooks",
      "Git integration: a pre-commit hook that verifies the plans and torch harnesses a commit "
      "touches (a harness runs when it or a Python file it imports changes; .shardproof.json "
      "\"harnesses\" lists them)");
  cmd->require_subcommand(1);

  CLI::App* install = cmd->add_subcommand(
      "install",
      "Install the pre-commit hook in this repository (a hook already there is kept as "
      "pre-commit.local and runs first)");
  install->callback([&args] { args.action = "install"; });
  CLI::App* uninstall = cmd->add_subcommand(
      "uninstall", "Remove the pre-commit hook, putting back the hook it replaced");
  uninstall->callback([&args] { args.action = "uninstall"; });

  CLI::App* run = cmd->add_subcommand(
      "run",
      "Verify the staged content of the plans and harnesses the staged changes (or FILES) "
      "affect; what the pre-commit hook runs");
  run->callback([&args] { args.action = "run"; });
  run->add_option("files", args.files,
                  "Check these files as if they were the staged changes (contents still come "
                  "from the index)");
  run->add_flag("--full", args.full, "Print each plan's full report, as verify does");
  run->add_flag("--no-daemon", args.no_daemon, "Verify in this process instead of the daemon");
  add_setting_flags(run, {"jobs", "rlimit", "timeout_ms", "unknown"}, args.setting_flags);

  CLI::App* affected = cmd->add_subcommand(
      "affected",
      "Print the plans and harnesses that FILES (or the changes since --base) affect, from the "
      "working tree; runs the regenerate rules of .shardproof.json that they trigger (for CI)");
  affected->callback([&args] { args.action = "affected"; });
  affected->add_option("files", args.files, "Changed files");
  affected->add_option("--base", args.base,
                       "Also the files changed between the merge base of REF and HEAD");
  return cmd;
}

int run_hooks_command(const HooksArgs& args) {
  try {
    if (args.action == "install") return install(false);
    if (args.action == "uninstall") return install(true);
    if (args.action == "run") return run_hooks_check(args);
    if (args.action == "affected") return affected(args);
  } catch (const hooks::NotARepository& e) {
    return fail(e.what(), kExitUsage);
  } catch (const hooks::GitError& e) {
    return fail(e.what(), kExitInternal);
  }
  return kExitUsage;
}

}  // namespace shardproof::cli
