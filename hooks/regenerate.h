// Running a .shardproof.json regenerate rule: its command, by /bin/sh -c at
// the root of a tree (a copy of the index, or the working tree).
#pragma once

#include <string>

#include "hooks/selection.h"

namespace shardproof::hooks {

struct RegenerateOutcome {
  bool ok = false;
  std::string plan_file;  // root/plan: where the command wrote the plan
  std::string problem;    // when not ok: what went wrong, with the end of its output
};

// `worktree` (the repository's working tree, absolute) is passed to the
// command as $SHARDPROOF_WORKTREE, whatever its root: a command running in
// a copy of the index may need something only the working tree has. With
// `scratch` (root is a throwaway copy) the plan is deleted first, so a
// command that writes nothing fails instead of passing on the old plan.
RegenerateOutcome regenerate(const RegenerateJob& job, const std::string& root,
                             const std::string& worktree, bool scratch);

}  // namespace shardproof::hooks
