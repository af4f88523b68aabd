// `shardproof hooks run [FILES...]`: what the pre-commit hook runs. Finds
// the plans the staged changes affect (hooks/selection.h), copies their
// staged content (and their graph files') into a temporary directory,
// regenerates the plans of changed parallelization configs, verifies them
// all (through the daemon), and prints each failure in a few lines.
// Nothing relevant staged: no temporary directory, no daemon, no verify.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "cli/harness.h"
#include "cli/hooks_command.h"
#include "cli/interrupt.h"
#include "cli/plan_verifier.h"
#include "cli/settings.h"
#include "engine/report/report.h"
#include "hooks/git.h"
#include "hooks/regenerate.h"
#include "hooks/selection.h"

namespace shardproof::cli {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/shardproof-hook-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("cannot create a temporary directory in " + tmpl);
    path_ = tmpl;
    remove_on_interrupt(path_);  // Ctrl-C leaves no staged plans behind
  }
  ~TempDir() {
    forget_on_interrupt(path_);
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write_file(const fs::path& path, const std::string& text) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) throw std::runtime_error("cannot write " + path.string());
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The report names the copy's files; the user knows them by their
// repository paths.
void rename_files(Report& r, const std::string& root, const std::string& display_root) {
  for (std::string* s : {&r.plan_path, &r.error}) replace_all(*s, root, display_root);
  if (r.invalid) {
    replace_all(r.invalid->file, root, display_root);
    replace_all(r.invalid->message, root, display_root);
  }
  for (Finding& f : r.findings) {
    replace_all(f.message, root, display_root);
    // A harness ran at the copy's root: its relative source paths are
    // repository paths.
    for (SourceRef& s : f.sources) {
      if (s.file.rfind(root, 0) == 0)
        replace_all(s.file, root, display_root);
      else if (!s.file.empty() && s.file[0] != '/')
        s.file = display_root + s.file;
    }
  }
}

// One plan to verify, and how to tell the user about it.
struct Work {
  std::string file;          // the file verified
  std::string display;       // its name for the user: its repository path, from the cwd
  std::string root;          // the directory standing for the repository root in `file`
  std::string display_root;  // what `root` becomes in the report
  std::string origin;        // why it is checked, when not simply staged
  std::string more;          // the command that shows the full report
  std::string problem;       // set: no plan to verify (its regeneration failed)
  bool harness = false;      // a torch harness: captured at `root`, then verified
};

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// A few lines: the verdict, then the first finding's stage, logical
// tensor, parallel tensors and ops (or the invalid plan's diagnostic).
void print_short(const Report& r, const Work& w) {
  std::cout << first_line(report_to_text(r)) << w.origin << "\n";
  if (r.verdict == Verdict::Invalid) {
    if (r.invalid)
      std::cout << "  " << invalid_text(*r.invalid) << "\n";
    else if (!r.error.empty())
      std::cout << "  " << r.error << "\n";
  } else if (r.verdict == Verdict::InternalError && !r.error.empty()) {
    std::cout << "  " << r.error << "\n";
  }
  if (!r.findings.empty()) {
    const Finding& f = r.findings.front();
    std::cout << "  " << (f.kind.empty() ? "finding" : f.kind);
    if (!f.stage.empty()) std::cout << " in " << f.stage;
    std::cout << "\n";
    auto list = [](const std::vector<std::string>& items) {
      std::string out;
      for (size_t i = 0; i < items.size() && i < 6; ++i) out += (i ? ", " : "") + items[i];
      if (items.size() > 6) out += ", ... (" + std::to_string(items.size()) + " in all)";
      return out;
    };
    if (!f.sources.empty()) std::cout << "    at " << source_to_string(f.sources.front()) << "\n";
    if (!f.tensor.empty()) std::cout << "    logical tensor: " << f.tensor << "\n";
    if (!f.parallel_tensors.empty())
      std::cout << "    parallel tensors: " << list(f.parallel_tensors) << "\n";
    if (!f.ops.empty()) std::cout << "    parallel ops: " << list(f.ops) << "\n";
    if (!f.message.empty()) std::cout << "    " << f.message << "\n";
    if (r.findings.size() > 1)
      std::cout << "  (" << r.findings.size() - 1 << " more finding"
                << (r.findings.size() > 2 ? "s" : "") << ")\n";
  }
  std::cout << "  full report: " << w.more << "\n";
}

// The changed files to look at: the staged changes, or the files named.
// nullopt (after saying why) for a file outside the repository.
std::optional<std::vector<hooks::ChangedFile>> changed_files(hooks::Git& git,
                                                             const HooksArgs& args) {
  if (args.files.empty()) return git.staged_changes();
  std::vector<hooks::ChangedFile> changes;
  for (const std::string& f : args.files) {
    std::optional<std::string> path = git.repo_path(f);
    if (!path) {
      std::cerr << "shardproof hooks: " << f << " is outside the repository " << git.top() << "\n";
      return std::nullopt;
    }
    changes.push_back({*path, false});
  }
  return changes;
}

// The selected plans as staged, copied under `tmp` at their repository
// paths with their graph files, then the plans the regenerate rules write.
std::vector<Work> prepare(hooks::Git& git, const hooks::Selection& selection,
                          const std::string& tmp, bool full) {
  const std::string staged_root = tmp + "/staged/";
  std::vector<std::string> files;
  for (const hooks::SelectedPlan& plan : selection.plans) {
    if (plan.harness) continue;  // it runs in the whole index's copy
    files.push_back(plan.path);
    files.insert(files.end(), plan.graphs.begin(), plan.graphs.end());
  }
  for (const auto& [path, text] : git.read_index(files))
    if (text) write_file(staged_root + path, *text);

  // "../" once per directory below the root that we run in.
  std::string top_from_cwd;
  for (char c : git.prefix())
    if (c == '/') top_from_cwd += "../";

  std::string index_copy;  // the whole index, written out once when a rule or harness needs it
  auto whole_index = [&] {
    if (index_copy.empty()) {
      index_copy = tmp + "/index/";
      git.checkout_index(index_copy);
    }
    return index_copy;
  };

  std::vector<Work> work;
  for (const hooks::SelectedPlan& plan : selection.plans) {
    Work w;
    w.harness = plan.harness;
    // A harness imports the staged content of the files beside it.
    const std::string root = plan.harness ? whole_index() : staged_root;
    w.file = root + plan.path;
    w.display = git.display_path(plan.path);
    w.root = root;
    w.display_root = top_from_cwd;
    if (plan.reason != "changed") w.origin = " [" + plan.reason + "]";
    std::vector<std::string> involved = plan.graphs;
    involved.push_back(plan.path);
    if (plan.harness && plan.reason != "changed") involved.push_back(plan.reason.substr(8));
    // `verify` reads the working tree: when that holds something else, only
    // this command shows what is staged.
    w.more = "shardproof hooks run --full " + git.display_path(plan.path);
    if (!full && git.worktree_matches_index(involved))
      w.more = "shardproof verify " + git.display_path(plan.path);
    work.push_back(std::move(w));
  }

  for (const hooks::RegenerateJob& job : selection.jobs) {
    std::string root = git.top() + "/";
    if (!job.in_worktree) root = whole_index();
    Work w;
    w.display = git.display_path(job.plan);
    w.root = root;
    w.display_root = top_from_cwd;
    w.origin = " [regenerated from " + git.display_path(job.config) + "]";
    w.more = "shardproof hooks run --full " + git.display_path(job.config);
    hooks::RegenerateOutcome outcome = hooks::regenerate(job, root, git.top(), !job.in_worktree);
    if (outcome.ok)
      w.file = outcome.plan_file;
    else
      w.problem = git.display_path(job.config) + ": " + outcome.problem;
    work.push_back(std::move(w));
  }
  return work;
}

// CI=true (or any value but "", "0", "false").
bool in_ci() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string v = ci;
  return !v.empty() && v != "0" && v != "false";
}

// Verifies each plan (starting the daemon for the first), prints its
// verdict line or its short failure, then whether the commit is blocked.
int verify_all(const std::vector<Work>& work, const HooksArgs& args,
               const hooks::RepoConfig& config, const std::string& unknown_origin) {
  std::cout << "shardproof: verifying " << work.size() << (work.size() == 1 ? " plan" : " plans")
            << " this commit touches (staged content)\n"
            << std::flush;
  VerifyArgs verify_args;
  // In CI (CI set, as every CI service sets it) nothing may outlive the
  // job: verify in this process, no daemon.
  verify_args.no_daemon = args.no_daemon || in_ci();
  verify_args.jobs = args.jobs;
  std::optional<PlanVerifier> verifier;
  VerifyOptions options;
  options.jobs = args.jobs;
  options.rlimit = args.rlimit;
  options.timeout_ms = args.timeout_ms;

  int failed = 0, undecided_blocking = 0, undecided_warned = 0;
  Verdict worst = Verdict::Equivalent;
  bool regenerate_failed = false;
  for (const Work& w : work) {
    if (!w.problem.empty()) {
      std::cout << w.problem << "\n";
      regenerate_failed = true;
      ++failed;
      continue;
    }
    if (!verifier) verifier.emplace(verify_args);
    Report report = w.harness ? verify_harness(*verifier, w.file, "", options, w.root)
                              : verifier->verify(w.file, options);
    rename_files(report, w.root, w.display_root);
    report.plan_path = w.display;
    if (args.full)
      std::cout << report_to_text(report);
    else if (report.verdict == Verdict::Equivalent)
      std::cout << first_line(report_to_text(report)) << w.origin << "\n";
    else
      print_short(report, w);
    std::cout << std::flush;
    if (report.verdict == Verdict::Unknown) {
      if (!config.block_unknown) {
        ++undecided_warned;
        continue;
      }
      ++undecided_blocking;
    }
    if (report.verdict != Verdict::Equivalent) ++failed;
    if (verdict_severity(report.verdict) > verdict_severity(worst)) worst = report.verdict;
  }

  if (undecided_warned > 0)
    std::cout << "shardproof: warning: " << undecided_warned << " plan"
              << (undecided_warned == 1 ? "" : "s")
              << " could not be decided (unknown); let through because \"unknown\" is \"warn\" ("
              << unknown_origin << ")\n";
  if (failed > 0) {
    std::cout << "shardproof: commit blocked: " << failed << " of " << work.size()
              << (work.size() == 1 ? " plan" : " plans") << " not proven equivalent";
    if (undecided_blocking > 0)
      std::cout << " (unknown blocks too: an undecided plan is never passed as equivalent)";
    std::cout << ".\n  Fix and stage again, or commit anyway with: git commit --no-verify\n";
  }
  std::cout.flush();
  if (!std::cout) return kExitInternal;
  int code = verdict_exit_code(worst);
  if (regenerate_failed && verdict_severity(worst) < verdict_severity(Verdict::Invalid))
    code = kExitUsage;
  return code;
}

}  // namespace

int run_hooks_check(const HooksArgs& args) {
  hooks::Git git = hooks::Git::open();
  std::optional<std::vector<hooks::ChangedFile>> changes = changed_files(git, args);
  if (!changes) return kExitUsage;
  if (changes->empty()) return kExitOk;

  // The configuration as staged, like everything else the hook reads.
  std::optional<std::string> config_text =
      git.read_index({hooks::kRepoConfigFile})[hooks::kRepoConfigFile];
  std::optional<hooks::RepoConfig> config = load_repo_config(config_text);
  if (!config) return kExitUsage;
  // The settings of its "verify" section, under the environment and flags.
  Settings settings = resolve_settings(config_text, hooks::kRepoConfigFile, args.setting_flags);
  export_remote_cache_settings(settings);
  HooksArgs effective = args;
  effective.jobs = settings.jobs;
  effective.rlimit = settings.rlimit;
  effective.timeout_ms = settings.timeout_ms;
  config->block_unknown = settings.block_unknown;
  const std::string unknown_origin = settings.get("unknown").origin;
  hooks::IndexReader index(git);
  hooks::Selection selection = hooks::select_plans(*changes, *config, index);
  // Nothing relevant: no temporary directory, no daemon, no output.
  if (selection.empty()) return kExitOk;

  TempDir tmp;
  // Graph references may reach anywhere in the repository, which the staged
  // copy stands for, and nowhere else.
  setenv("SHARDPROOF_GRAPH_ROOT", tmp.path().c_str(), 1);
  std::vector<Work> work = prepare(git, selection, tmp.path(), args.full);
  return verify_all(work, effective, *config, unknown_origin);
}

}  // namespace shardproof::cli
