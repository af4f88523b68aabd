// Running a program and collecting what it writes: git, and the commands a
// repository's .shardproof.json names to regenerate a plan.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace shardproof::hooks {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by one; -1 when it could not start
  std::string out;     // stdout (with stderr too when merged)
  std::string err;     // stderr, unless merged into `out`
};

struct ProcessOptions {
  std::string cwd;                   // empty: this process's
  std::optional<std::string> input;  // written to its stdin; none: /dev/null
  bool merge_stderr = false;         // stderr into `out`, interleaved as written
  // "NAME=VALUE" entries that replace (or add to) this process's environment.
  std::vector<std::string> env;
};

// This process's environment with `overrides` ("NAME=VALUE") replacing its
// entries by name: the environment a child started with `options.env` gets.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

// Runs argv[0] (looked up on PATH) with the environment of this process.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

}  // namespace shardproof::hooks
