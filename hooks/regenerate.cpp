#include "hooks/regenerate.h"

#include <stdlib.h>

#include <filesystem>
#include <vector>

#include "hooks/process.h"

namespace shardproof::hooks {
namespace {

// The last `n` lines of a command's output, indented: enough to see why.
std::string tail_lines(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out += "\n    " + lines[i];
  return out;
}

}  // namespace

RegenerateOutcome regenerate(const RegenerateJob& job, const std::string& root,
                             const std::string& worktree, bool scratch) {
  RegenerateOutcome outcome;
  outcome.plan_file = (std::filesystem::path(root) / job.plan).string();
  std::error_code ec;
  // In a scratch copy the plan that is there (the committed one) goes
  // first: a command that writes nothing must not pass on it.
  if (scratch) std::filesystem::remove(outcome.plan_file, ec);
  setenv("SHARDPROOF_WORKTREE", worktree.c_str(), 1);
  ProcessOptions options;
  options.cwd = root;
  options.merge_stderr = true;
  ProcessResult r = run_process({"/bin/sh", "-c", job.command}, options);
  if (r.exit_code != 0) {
    outcome.problem = "the regenerate command failed (exit " + std::to_string(r.exit_code) +
                      "): " + job.command + tail_lines(r.out + r.err, 10);
    return outcome;
  }
  if (!std::filesystem::is_regular_file(outcome.plan_file, ec)) {
    outcome.problem = "the regenerate command did not write " + job.plan + ": " + job.command;
    return outcome;
  }
  outcome.ok = true;
  return outcome;
}

}  // namespace shardproof::hooks
