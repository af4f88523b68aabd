// The settings of `verify` (and of the hook and CI, which verify too, and
// of the cache's remote tier), each
// from the first layer that sets it: a flag, an environment variable, the
// "verify" section of the repository's .shardproof.json, the default.
// `shardproof config` prints each effective value with its origin, like
// `ccache -p`. A malformed value in a file or the environment is a warning
// that names it, and the layer below is used.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace shardproof::cli {

struct Setting {
  std::string key;     // "jobs", as in the file's "verify" section
  std::string value;   // as text
  std::string origin;  // "default", the file's path, "SHARDPROOF_JOBS" or "--jobs"
};

struct Settings {
  int jobs = 0;
  uint64_t rlimit = 0;
  unsigned timeout_ms = 0;
  bool block_unknown = true;   // "unknown": "block" or "warn" (let an undecided plan through)
  std::vector<Setting> table;  // every setting, in the order `config` prints them

  const Setting& get(const std::string& key) const;
};

// The flags of the settings that a command offers, in its args: those given
// on the command line are recorded in `given` (flag name -> text) after the
// parse. `keys` are setting keys ("jobs", "rlimit", "timeout_ms", "unknown").
void add_setting_flags(CLI::App* cmd, const std::vector<std::string>& keys,
                       std::map<std::string, std::string>& given);

// The repository file that applies in the current directory: .shardproof.json
// there or in the nearest parent, not above the repository's root (.git).
std::optional<std::string> find_settings_file();

// Resolves every setting. `file_text` is the file's content (nullopt: no
// file), `file_name` how messages and origins name it. Warnings go to stderr.
Settings resolve_settings(const std::optional<std::string>& file_text, const std::string& file_name,
                          const std::map<std::string, std::string>& flags);

// resolve_settings with the file find_settings_file() names.
Settings resolve_local_settings(const std::map<std::string, std::string>& flags);

// The remote cache settings (remote_cache, remote_cache_mode,
// remote_cache_timeout_ms) that come from the file, put into the
// environment where the cache reads them (cache/remote_store.h): this
// process's cache, and a daemon it starts, use them, and the daemon's
// identity (daemon/state_dir.h) includes them. Call before opening a cache
// or reaching a daemon.
void export_remote_cache_settings(const Settings& settings);
// resolve_local_settings, then export_remote_cache_settings.
Settings resolve_and_export_local_settings(const std::map<std::string, std::string>& flags);

// Warns (on stderr, naming it) about each SHARDPROOF_* size or duration in
// the environment that does not parse: the code that reads it silently
// falls back to its default.
void warn_about_malformed_environment();

// `shardproof config [--json]`.
struct ConfigArgs {
  std::string format = "text";
  std::map<std::string, std::string> flags;
};
CLI::App* add_config_command(CLI::App& app, ConfigArgs& args);
int run_config(const ConfigArgs& args);

}  // namespace shardproof::cli
