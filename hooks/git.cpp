#include "hooks/git.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardproof::hooks {
namespace {

namespace fs = std::filesystem;

std::string trim_newline(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string first_line(const std::string& s) {
  return trim_newline(s.substr(0, s.find('\n')));
}

std::vector<std::string> split_nul(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nul; (nul = s.find('\0', start)) != std::string::npos; start = nul + 1)
    out.push_back(s.substr(start, nul - start));
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

// git resolves relative GIT_DIR and friends against its working directory;
// ours runs at the worktree root, which need not be where we were started.
void make_git_env_absolute() {
  for (const char* name :
       {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR"}) {
    const char* value = getenv(name);
    if (!value || !*value || fs::path(value).is_absolute()) continue;
    std::error_code ec;
    fs::path absolute = fs::absolute(value, ec);
    if (!ec) setenv(name, absolute.lexically_normal().c_str(), 1);
  }
}

}  // namespace

Git Git::open() {
  make_git_env_absolute();
  Git g;
  ProcessResult r =
      run_process({"git", "rev-parse", "--show-toplevel", "--show-prefix"}, ProcessOptions{});
  if (r.exit_code != 0) {
    std::string why = first_line(r.err);
    throw NotARepository("not in a git working tree" + (why.empty() ? "" : " (" + why + ")"));
  }
  std::istringstream lines(r.out);
  std::getline(lines, g.top_);
  std::getline(lines, g.prefix_);
  if (g.top_.empty()) throw NotARepository("not in a git working tree");
  return g;
}

ProcessResult Git::git(std::vector<std::string> args, ProcessOptions options) const {
  args.insert(args.begin(), {"git", "-C", top_});
  return run_process(args, options);
}

ProcessResult Git::git_ok(std::vector<std::string> args, ProcessOptions options) const {
  std::string what = args.empty() ? "git" : "git " + args[0];
  ProcessResult r = git(std::move(args), std::move(options));
  if (r.exit_code != 0)
    throw GitError(what + " failed (exit " + std::to_string(r.exit_code) + ")" +
                   (r.err.empty() ? "" : ": " + first_line(r.err)));
  return r;
}

std::optional<std::string> Git::repo_path(const std::string& arg) const {
  fs::path p(arg);
  fs::path rel;
  if (p.is_absolute()) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(p, ec);
    rel = (ec ? p : canonical).lexically_normal().lexically_relative(top_);
  } else {
    rel = (fs::path(prefix_) / p).lexically_normal();
  }
  std::string s = rel.generic_string();
  if (s.empty() || s == "." || s == ".." || s.rfind("../", 0) == 0) return std::nullopt;
  return s;
}

std::string Git::display_path(const std::string& repo_path) const {
  if (prefix_.empty()) return repo_path;
  return fs::path(repo_path).lexically_relative(fs::path(prefix_)).generic_string();
}

std::vector<ChangedFile> Git::staged_changes() {
  // Without HEAD (the first commit) git compares the index with the empty tree.
  return diff({"--cached"});
}

std::vector<ChangedFile> Git::changes_since(const std::string& ref) {
  return diff({ref + "...HEAD"});
}

std::vector<ChangedFile> Git::diff(std::vector<std::string> args) {
  args.insert(args.begin(), {"diff", "--name-status", "-z", "--no-renames", "--no-relative",
                             "--no-ext-diff", "--ignore-submodules"});
  args.push_back("--");
  ProcessResult r = git_ok(args);
  std::vector<std::string> fields = split_nul(r.out);
  std::vector<ChangedFile> changes;
  for (size_t i = 0; i + 1 < fields.size(); i += 2) {
    const std::string& status = fields[i];
    if (status.empty() || status[0] == 'U') continue;  // unmerged: git refuses to commit it
    changes.push_back({fields[i + 1], status[0] == 'D'});
  }
  return changes;
}

std::string Git::hooks_dir() {
  std::string dir = trim_newline(git_ok({"rev-parse", "--git-path", "hooks"}).out);
  fs::path p(dir);
  return (p.is_absolute() ? p : fs::path(top_) / p).lexically_normal().string();
}

std::map<std::string, std::optional<std::string>> Git::read_index(
    const std::vector<std::string>& paths) {
  std::map<std::string, std::optional<std::string>> out;
  std::string input;
  std::vector<std::string> asked;
  for (const std::string& p : paths) {
    out[p] = std::nullopt;
    if (p.find('\n') != std::string::npos) continue;  // cannot be asked for on a line
    input += ":" + p + "\n";
    asked.push_back(p);
  }
  if (asked.empty()) return out;
  ProcessOptions options;
  options.input = input;
  ProcessResult r = git_ok({"cat-file", "--batch"}, options);
  // One answer per line asked: "<oid> <type> <size>\n<content>\n" or
  // "<name> missing\n".
  size_t pos = 0;
  for (const std::string& p : asked) {
    size_t eol = r.out.find('\n', pos);
    if (eol == std::string::npos) throw GitError("git cat-file: truncated answer");
    std::string header = r.out.substr(pos, eol - pos);
    pos = eol + 1;
    std::istringstream h(header);
    std::string oid, type;
    size_t size = 0;
    if (!(h >> oid >> type >> size)) continue;  // missing, ambiguous
    if (pos + size > r.out.size()) throw GitError("git cat-file: truncated answer");
    if (type == "blob") out[p] = r.out.substr(pos, size);
    pos += size + 1;
  }
  return out;
}

std::vector<std::string> Git::grep_plans(bool in_index) {
  std::vector<std::string> args = {"grep", "-l", "-z", "--full-name", "-F"};
  if (in_index) args.push_back("--cached");
  args.insert(args.end(), {"-e", "shardproof-plan/1", "--", "*.json"});
  ProcessResult r = git(args);
  if (r.exit_code == 1) return {};  // no match
  if (r.exit_code != 0)
    throw GitError("git grep failed" + (r.err.empty() ? "" : ": " + first_line(r.err)));
  return split_nul(r.out);
}

std::vector<std::string> Git::python_files() {
  ProcessResult r = git_ok({"ls-files", "-z", "--", "*.py"});
  return split_nul(r.out);
}

void Git::checkout_index(const std::string& dir) {
  git_ok({"checkout-index", "--all", "--force", "--prefix=" + dir});
}

bool Git::worktree_matches_index(const std::vector<std::string>& paths) {
  std::vector<std::string> args = {"--literal-pathspecs", "diff", "--quiet", "--no-ext-diff", "--"};
  args.insert(args.end(), paths.begin(), paths.end());
  return git(args).exit_code == 0;
}

std::map<std::string, std::optional<std::string>> WorktreeReader::read(
    const std::vector<std::string>& paths) {
  std::map<std::string, std::optional<std::string>> out;
  for (const std::string& p : paths) {
    out[p] = std::nullopt;
    fs::path file = fs::path(git_.top()) / p;
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    std::ifstream in(file, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in) out[p] = buf.str();
  }
  return out;
}

}  // namespace shardproof::hooks
