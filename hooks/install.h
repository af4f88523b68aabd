// `shardproof hooks install|uninstall`: puts the pre-commit hook
// (hooks/pre-commit) into a hooks directory, keeping any hook that is
// already there as pre-commit.local (the installed hook runs it first),
// and takes it out again, putting the kept hook back.
#pragma once

#include <string>

#include "engine/core/status.h"

namespace shardproof::hooks {

// The marker that tells our hook from anyone else's.
inline constexpr const char* kHookMarker = "shardproof-managed-hook";

// hooks/pre-commit with `binary` as the shardproof it runs.
std::string hook_script(const std::string& binary);

// The pre-commit framework's configuration (https://pre-commit.com), at the
// repository's top. Its `pre-commit install` replaces .git/hooks/pre-commit
// with its own, so chaining ours there breaks one or the other.
inline constexpr const char* kPreCommitFrameworkConfig = ".pre-commit-config.yaml";

// What `hooks install` says instead of installing in a repository that uses
// the framework: how to list shardproof's hook (.pre-commit-hooks.yaml) in
// `config_text` (at `rev: v<version>`), or that it is listed already.
std::string pre_commit_framework_advice(const std::string& config_text, const std::string& version);

// Idempotent: a second install changes nothing (or only the binary's path).
// Refuses (and changes nothing) when a foreign hook is in place and
// pre-commit.local is taken too. `message` says what was done.
Status install_hook(const std::string& hooks_dir, const std::string& binary, std::string* message);
// Removes our hook and renames pre-commit.local back; leaves a foreign
// hook alone.
Status uninstall_hook(const std::string& hooks_dir, std::string* message);

}  // namespace shardproof::hooks
