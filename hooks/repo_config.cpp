#include "hooks/repo_config.h"

#include <filesystem>

#include <nlohmann/json.hpp>

namespace shardproof::hooks {
namespace {

using nlohmann::json;

bool is_comment(const std::string& key) {
  return key.rfind("//", 0) == 0;
}

bool string_list(const json& v, std::vector<std::string>* out) {
  if (!v.is_array()) return false;
  for (const json& item : v) {
    if (!item.is_string() || item.get<std::string>().empty()) return false;
    out->push_back(item.get<std::string>());
  }
  return true;
}

bool parse_rule(const json& j, const std::string& where, RegenerateRule* rule, std::string* error) {
  if (!j.is_object()) {
    *error = where + ": expected an object {\"configs\", \"command\", \"plan\"}";
    return false;
  }
  for (const auto& [key, value] : j.items()) {
    if (is_comment(key)) continue;
    if (key == "configs") {
      if (!string_list(value, &rule->configs) || rule->configs.empty()) {
        *error = where + "/configs: expected a non-empty list of glob patterns";
        return false;
      }
    } else if (key == "command" || key == "plan") {
      if (!value.is_string() || value.get<std::string>().empty()) {
        *error = where + "/" + key + ": expected a non-empty string";
        return false;
      }
      (key == "command" ? rule->command : rule->plan) = value.get<std::string>();
    } else if (key == "run_in") {
      if (value != "index" && value != "worktree") {
        *error = where + "/run_in: expected \"index\" or \"worktree\"";
        return false;
      }
      rule->in_worktree = value == "worktree";
    } else {
      *error = where + ": unknown key \"" + key + "\"";
      return false;
    }
  }
  for (const char* required : {"configs", "command", "plan"}) {
    if (!j.contains(required)) {
      *error = where + ": \"" + required + "\" is required";
      return false;
    }
  }
  if (std::filesystem::path(rule->plan).is_absolute()) {
    *error = where + "/plan: expected a path relative to the repository root";
    return false;
  }
  return true;
}

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::optional<RepoConfig> parse_repo_config(const std::string& text, std::string* error) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = std::string(kRepoConfigFile) + ": not a JSON object";
    return std::nullopt;
  }
  const std::string file = kRepoConfigFile;
  RepoConfig config;
  for (const auto& [key, value] : j.items()) {
    if (is_comment(key)) continue;
    if (key == "exclude") {
      if (!string_list(value, &config.exclude)) {
        *error = file + ": /exclude: expected a list of glob patterns";
        return std::nullopt;
      }
    } else if (key == "unknown") {
      if (value != "block" && value != "warn") {
        *error = file + ": /unknown: expected \"block\" or \"warn\"";
        return std::nullopt;
      }
      config.block_unknown = value == "block";
    } else if (key == "harnesses") {
      if (!string_list(value, &config.harnesses)) {
        *error = file + ": /harnesses: expected a list of glob patterns of harness files (.py)";
        return std::nullopt;
      }
    } else if (key == "verify") {
      // The settings of verify: read (and warned about) by cli/settings.h.
      if (!value.is_object()) {
        *error = file + ": /verify: expected an object of settings";
        return std::nullopt;
      }
    } else if (key == "regenerate") {
      if (!value.is_array()) {
        *error = file + ": /regenerate: expected a list of rules";
        return std::nullopt;
      }
      for (size_t i = 0; i < value.size(); ++i) {
        RegenerateRule rule;
        if (!parse_rule(value[i], file + ": /regenerate/" + std::to_string(i), &rule, error))
          return std::nullopt;
        config.regenerate.push_back(std::move(rule));
      }
    } else {
      *error = file + ": unknown key \"" + key + "\"";
      return std::nullopt;
    }
  }
  return config;
}

std::string expand_placeholders(const std::string& text, const std::string& config,
                                const std::string& plan, bool shell_quote) {
  std::filesystem::path p(config);
  std::string dir = p.parent_path().string();
  const std::pair<const char*, std::string> values[] = {
      {"{config}", config},
      {"{stem}", p.stem().string()},
      {"{dir}", dir.empty() ? "." : dir},
      {"{plan}", plan},
  };
  std::string out;
  for (size_t i = 0; i < text.size();) {
    bool replaced = false;
    for (const auto& [name, value] : values) {
      if (text.compare(i, std::char_traits<char>::length(name), name) == 0) {
        out += shell_quote ? shell_quoted(value) : value;
        i += std::char_traits<char>::length(name);
        replaced = true;
        break;
      }
    }
    if (!replaced) out += text[i++];
  }
  return out;
}

}  // namespace shardproof::hooks
