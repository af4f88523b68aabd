#include "cli/settings.h"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <limits>

#include <nlohmann/json.hpp>

#include "cache/redis_client.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "engine/core/did_you_mean.h"
#include "engine/core/units.h"
#include "engine/format/file_text.h"
#include "hooks/repo_config.h"

namespace shardproof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One setting: its names in each layer, its default, and how a value is
// read (nullopt: malformed; `expected` says what is wanted).
struct Definition {
  const char* key;
  const char* env;
  const char* flag;
  std::string fallback;
  const char* expected;
  const char* help;
  std::function<bool(const std::string&)> valid;
  // A setting the cache reads from the environment itself
  // (cache/remote_store.h): what it uses when the variable is malformed
  // (the safe choice, not the layer below), so `config` shows that.
  std::optional<std::string> malformed_env_value;
};

bool whole_number(const std::string& s, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
}

const std::vector<Definition>& definitions() {
  static const std::vector<Definition> defs = {
      {"jobs", "SHARDPROOF_JOBS", "--jobs", "0", "a whole number between 0 and 1024 (0: all cores)",
       "Solver threads (0: all cores)",
       [](const std::string& s) { return whole_number(s, 0, kMaxJobs); }, std::nullopt},
      {"rlimit", "SHARDPROOF_RLIMIT", "--rlimit", std::to_string(VerifyOptions{}.rlimit),
       "a positive whole number",
       "Z3 resource limit per claim query (deterministic; exceeded: unknown)",
       [](const std::string& s) {
         return whole_number(s, 1, std::numeric_limits<uint64_t>::max());
       },
       std::nullopt},
      {"timeout_ms", "SHARDPROOF_TIMEOUT_MS", "--timeout-ms",
       std::to_string(VerifyOptions{}.timeout_ms), "a whole number of milliseconds (0: none)",
       "Wall-clock backstop per claim query in ms (0: none; exceeded: unknown)",
       [](const std::string& s) {
         return whole_number(s, 0, std::numeric_limits<unsigned>::max());
       },
       std::nullopt},
      {"unknown", "SHARDPROOF_UNKNOWN", "--unknown", "block", "\"block\" or \"warn\"",
       "An undecided plan: block (exit 3) or warn (say so, exit as if proven); the report "
       "still says UNKNOWN",
       [](const std::string& s) { return s == "block" || s == "warn"; }, std::nullopt},
      // The remote cache tier (docs/cache.md): no flags; the team key's
      // file stays in the environment only (a per-machine secret).
      {"remote_cache", "SHARDPROOF_REMOTE_CACHE", "", "",
       "redis://[:password@]host[:port][/db] or unix:///path/redis.sock[?db=N]",
       "The shared remote cache (Redis); empty: none",
       [](const std::string& s) {
         std::string why;
         return s.empty() || cache::parse_redis_url(s, &why).has_value();
       },
       ""},  // a malformed address: no remote
      {"remote_cache_mode", "SHARDPROOF_REMOTE_CACHE_MODE", "", "read-write",
       "\"read-write\" or \"read-only\"", "read-write, or read-only (read proofs, write none)",
       [](const std::string& s) { return s == "read-write" || s == "read-only"; }, "read-only"},
      {"remote_cache_timeout_ms", "SHARDPROOF_REMOTE_CACHE_TIMEOUT_MS", "", "250",
       "a whole number of milliseconds from 1 to 60000",
       "The remote's deadline to connect and for each command, in ms",
       [](const std::string& s) { return whole_number(s, 1, 60'000); }, "250"},
  };
  return defs;
}

// The settings the cache's remote tier reads from the environment
// (cache/remote_store.h), in resolution order.
constexpr const char* kRemoteKeys[] = {"remote_cache", "remote_cache_mode",
                                       "remote_cache_timeout_ms"};

const Definition* find_definition(const std::string& key) {
  for (const Definition& d : definitions())
    if (key == d.key) return &d;
  return nullptr;
}

void warn(const std::string& message) {
  std::cerr << "shardproof: warning: " << message << "\n";
}

std::string as_text(const json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The file's layer: key -> (value, origin); malformed values are warned
// about and left out.
std::map<std::string, std::pair<std::string, std::string>> file_layer(
    const std::optional<std::string>& text, const std::string& name) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  if (!text) return out;
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    warn(name + ": not a JSON object; its settings are ignored");
    return out;
  }
  auto take = [&](const std::string& key, const json& v, const std::string& where,
                  const std::string& origin) {
    const Definition* d = find_definition(key);
    std::string value = as_text(v);
    if ((v.is_string() || v.is_number_unsigned()) && d->valid(value))
      out[key] = {value, origin};
    else
      warn(name + ": " + where + ": expected " + d->expected + ", found " + v.dump() + "; ignored");
  };
  // The hook's older top-level "unknown", below the section's.
  if (j.contains("unknown")) take("unknown", j["unknown"], "/unknown", name + " (unknown)");
  if (!j.contains("verify")) return out;
  const json& section = j["verify"];
  if (!section.is_object()) {
    warn(name + ": /verify: expected an object; ignored");
    return out;
  }
  std::vector<std::string> keys;
  for (const Definition& d : definitions()) keys.push_back(d.key);
  for (const auto& [key, v] : section.items()) {
    if (key.rfind("//", 0) == 0) continue;  // a comment
    if (!find_definition(key)) {
      warn(name + ": /verify: unknown key \"" + key + "\"" + did_you_mean(key, keys) + "; ignored");
      continue;
    }
    take(key, v, "/verify/" + key, name);
  }
  return out;
}

}  // namespace

const Setting& Settings::get(const std::string& key) const {
  for (const Setting& s : table)
    if (s.key == key) return s;
  throw std::logic_error("no setting " + key);
}

void add_setting_flags(CLI::App* cmd, const std::vector<std::string>& keys,
                       std::map<std::string, std::string>& given) {
  for (const std::string& key : keys) {
    const Definition* d = find_definition(key);
    std::string flag = d->flag;
    CLI::Option* o = cmd->add_option_function<std::string>(
        key == "jobs" ? "--jobs,-j" : flag,
        [&given, flag](const std::string& v) { given[flag] = v; },
        std::string(d->help) + " [default " + d->fallback + "; $" + d->env +
            "; .shardproof.json verify." + key + "]");
    if (key == "jobs")
      o->check(between("--jobs", 0, kMaxJobs, "0: all cores"));
    else if (key == "unknown")
      o->check(CLI::IsMember({"block", "warn"}));
    else
      o->check(CLI::Validator(
          [d](std::string& s) { return d->valid(s) ? "" : std::string("expected ") + d->expected; },
          "", ""));
  }
}

std::optional<std::string> find_settings_file() {
  std::error_code ec;
  for (fs::path dir = fs::current_path(ec); !ec && !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / hooks::kRepoConfigFile, ec))
      return (dir / hooks::kRepoConfigFile).string();
    if (fs::exists(dir / ".git", ec) || dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

Settings resolve_settings(const std::optional<std::string>& file_text, const std::string& file_name,
                          const std::map<std::string, std::string>& flags) {
  auto from_file = file_layer(file_text, file_name);
  Settings s;
  for (const Definition& d : definitions()) {
    Setting row{d.key, d.fallback, "default"};
    if (auto it = from_file.find(d.key); it != from_file.end())
      row = {d.key, it->second.first, it->second.second};
    if (const char* env = std::getenv(d.env); env && *env) {
      const std::string found =
          std::string("$") + d.env + ": expected " + d.expected + ", found \"" + env + "\"";
      if (d.valid(env)) {
        row = {d.key, env, d.env};
      } else if (d.malformed_env_value) {
        row = {d.key, *d.malformed_env_value, std::string(d.env) + ", malformed"};
        warn(found + "; the cache uses " +
             (d.malformed_env_value->empty() ? "no remote" : *d.malformed_env_value));
      } else {
        warn(found + "; ignored");
      }
    }
    if (auto it = flags.find(d.flag); *d.flag && it != flags.end() && d.valid(it->second))
      row = {d.key, it->second, d.flag};
    s.table.push_back(row);
  }
  s.jobs = std::stoi(s.get("jobs").value);
  s.rlimit = std::stoull(s.get("rlimit").value);
  s.timeout_ms = static_cast<unsigned>(std::stoul(s.get("timeout_ms").value));
  s.block_unknown = s.get("unknown").value == "block";
  return s;
}

Settings resolve_local_settings(const std::map<std::string, std::string>& flags) {
  std::optional<std::string> path = find_settings_file();
  std::optional<std::string> text;
  if (path) {
    std::string why;
    text = read_file_text(*path, &why);
    if (!text) warn(why + "; its settings are ignored");
  }
  return resolve_settings(text, path ? *path : std::string(), flags);
}

void export_remote_cache_settings(const Settings& settings) {
  for (const char* key : kRemoteKeys) {
    const Setting& row = settings.get(key);
    const Definition* d = find_definition(key);
    // Set in the environment (even malformed: the cache then takes the safe
    // choice itself), or the default: nothing to pass on.
    if (row.origin == d->env || row.origin == "default") continue;
    const char* env = std::getenv(d->env);
    if (env != nullptr && *env != '\0') continue;
    setenv(d->env, row.value.c_str(), 1);
  }
}

Settings resolve_and_export_local_settings(const std::map<std::string, std::string>& flags) {
  Settings s = resolve_local_settings(flags);
  export_remote_cache_settings(s);
  return s;
}

void warn_about_malformed_environment() {
  static const char* const kSizes[] = {"SHARDPROOF_CACHE_MAX_SIZE", "SHARDPROOF_DAEMON_MEMORY",
                                       "SHARDPROOF_MAX_FILE_BYTES"};
  static const char* const kDurations[] = {"SHARDPROOF_DAEMON_TIMEOUT",
                                           "SHARDPROOF_DAEMON_IDLE_TIMEOUT"};
  for (const char* name : kSizes) {
    const char* v = std::getenv(name);
    if (v && *v && !parse_size(v))
      warn(std::string("$") + name + ": expected a size such as 512M or 2G, found \"" + v +
           "\"; the default is used");
  }
  for (const char* name : kDurations) {
    const char* v = std::getenv(name);
    if (v && *v && !parse_duration_seconds(v))
      warn(std::string("$") + name + ": expected a duration such as 90s, 15m or 2h, found \"" + v +
           "\"; the default is used");
  }
}

CLI::App* add_config_command(CLI::App& app, ConfigArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "config", "Print each setting of verify with its value and where it comes from");
  cmd->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  add_setting_flags(cmd, {"jobs", "rlimit", "timeout_ms", "unknown"}, args.flags);
  return cmd;
}

int run_config(const ConfigArgs& args) {
  Settings s = resolve_local_settings(args.flags);
  if (args.format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const Setting& row : s.table)
      out[row.key] = {{"value", row.value}, {"origin", row.origin}};
    std::cout << out.dump(2) << "\n";
  } else {
    for (const Setting& row : s.table)
      std::cout << "(" << row.origin << ") " << row.key << " = " << row.value << "\n";
  }
  std::cout.flush();
  return std::cout ? kExitOk : kExitInternal;
}

}  // namespace shardproof::cli
