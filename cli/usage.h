// Command-line usage that explains itself: range checks that say the range
// in words, "did you mean" for a misspelt command or flag, `help [cmd]`,
// and one version text for `--version` and `version`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace shardproof::cli {

// A whole number in [lo, hi]: "--jobs must be between 0 and 1024 (0: all
// cores)" rather than CLI11's range of 300 digits. `note` may be empty.
CLI::Validator between(const std::string& flag, int64_t lo, int64_t hi, const std::string& note);

// The text of `shardproof version` and `shardproof --version`, no final newline.
std::string version_text();

// Adds `help [command...]`. Runs it after a parse (returns the exit code)
// when it was given; -1 otherwise.
CLI::App* add_help_command(CLI::App& app, std::vector<std::string>& words);
int run_help(CLI::App& app, const std::vector<std::string>& words);

// Checks argv before CLI11 does, for what CLI11 says badly: no command at
// all, an unknown command (with the closest one). Prints and returns 2 for
// those, -1 when CLI11 should parse.
int precheck_command(CLI::App& app, int argc, char** argv);

// After a parse error: "did you mean" lines for the misspelt command or
// flag words in argv, or "" when none is close.
std::string suggestions(CLI::App& app, int argc, char** argv);

}  // namespace shardproof::cli
