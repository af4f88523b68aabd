// The parts of `shardproof hooks` shared between its files.
#pragma once

#include <optional>
#include <string>

#include "cli/commands.h"
#include "hooks/repo_config.h"

namespace shardproof::cli {

// `hooks run`: verifies what is staged (cli/hooks_run.cpp).
int run_hooks_check(const HooksArgs& args);

// The repository's .shardproof.json from `text` (the defaults when there
// is none); nullopt after saying on stderr what is wrong with it.
std::optional<hooks::RepoConfig> load_repo_config(const std::optional<std::string>& text);

}  // namespace shardproof::cli
