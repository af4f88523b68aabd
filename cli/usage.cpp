#include "cli/usage.h"

#include <algorithm>
#include <charconv>
#include <iostream>

#include "engine/core/did_you_mean.h"
#include "engine/core/z3_version.h"

namespace shardproof::cli {
namespace {

bool is_help_or_version(const std::string& word) {
  return word == "-h" || word == "--help" || word == "--help-all" || word == "--version";
}

std::vector<std::string> command_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string command_list(const CLI::App& app) {
  std::string out;
  for (const std::string& n : command_names(app)) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The deepest (sub)command named by argv, and the index of the first word
// after its name.
std::pair<CLI::App*, int> deepest_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  int next = 1;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;
    CLI::App* sub = nullptr;
    for (CLI::App* s : at->get_subcommands([](CLI::App*) { return true; }))
      if (s->get_name() == word) sub = s;
    if (sub == nullptr) continue;
    at = sub;
    next = i + 1;
  }
  return {at, next};
}

// "shardproof cache gc" for messages.
std::string full_name(const CLI::App* app) {
  std::string out;
  for (; app != nullptr; app = app->get_parent())
    out = app->get_parent() ? " " + app->get_name() + out : "shardproof" + out;
  return out;
}

// An unknown word where a (sub)command belongs: the message, or "".
std::string unknown_command(const CLI::App& at, const std::string& word) {
  std::vector<std::string> names = command_names(at);
  for (const std::string& n : names)
    if (n == word) return "";
  return full_name(&at) + ": unknown command \"" + word + "\"" + did_you_mean(word, names) +
         "\n(commands: " + command_list(at) + ")\n";
}

// The commands (below `app`) that have option `flag`, as "`a`, `b`".
std::string commands_with_option(const CLI::App& app, const std::string& flag) {
  std::string out;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    for (const CLI::Option* o : sub->get_options())
      for (const std::string& l : o->get_lnames())
        if ("--" + l == flag) out += (out.empty() ? "`" : ", `") + full_name(sub) + "`";
    std::string deeper = commands_with_option(*sub, flag);
    if (!deeper.empty()) out += (out.empty() ? "" : ", ") + deeper;
  }
  return out;
}

}  // namespace

CLI::Validator between(const std::string& flag, int64_t lo, int64_t hi, const std::string& note) {
  std::string words = "must be a whole number between " + std::to_string(lo) + " and " +
                      std::to_string(hi) + (note.empty() ? "" : " (" + note + ")");
  return CLI::Validator(
      [words, lo, hi](std::string& s) -> std::string {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi)
          return words + ", not \"" + s + "\"";
        return "";
      },
      "INT in " + std::to_string(lo) + ".." + std::to_string(hi), flag);
}

std::string version_text() {
  return std::string("shardproof ") + SHARDPROOF_VERSION + "\nz3 " + z3_version();
}

CLI::App* add_help_command(CLI::App& app, std::vector<std::string>& words) {
  CLI::App* cmd = app.add_subcommand("help", "Print the help of shardproof or of one command");
  cmd->add_option("command", words, "The command (and subcommand), e.g. `cache gc`");
  return cmd;
}

int run_help(CLI::App& app, const std::vector<std::string>& words) {
  CLI::App* at = &app;
  for (const std::string& w : words) {
    if (std::string unknown = unknown_command(*at, w); !unknown.empty()) {
      std::cerr << unknown;
      return 2;
    }
    at = at->get_subcommand(w);
  }
  // Not at->help(): that shows the parsed subcommand's help, `help` itself.
  std::cout << at->get_formatter()->make_help(at, full_name(at), CLI::AppFormatMode::Normal);
  return 0;
}

int precheck_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (is_help_or_version(argv[i])) return -1;
  auto [at, next] = deepest_command(app, argc, argv);
  if (command_names(*at).empty() || at->get_require_subcommand_min() == 0) return -1;
  // The first plain word after the command's name is where its subcommand goes.
  for (int i = next; i < argc; ++i) {
    std::string word = argv[i];
    if (!word.empty() && word[0] == '-') continue;
    std::string unknown = unknown_command(*at, word);
    if (unknown.empty()) return -1;
    std::cerr << unknown << "Run `shardproof help" << full_name(at).substr(10) << "` for more.\n";
    return 2;
  }
  std::cerr << full_name(at) << ": which command? One of: " << command_list(*at)
            << "\nRun `shardproof help" << full_name(at).substr(10) << "` for more.\n";
  return 2;
}

std::string suggestions(CLI::App& app, int argc, char** argv) {
  CLI::App* at = deepest_command(app, argc, argv).first;
  std::vector<std::string> flags;
  for (const CLI::App* a = at; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& l : o->get_lnames()) flags.push_back("--" + l);
      for (const std::string& s : o->get_snames()) flags.push_back("-" + s);
    }
  }
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.size() < 3 || word.compare(0, 2, "--") != 0) continue;
    word = word.substr(0, word.find('='));
    if (std::find(flags.begin(), flags.end(), word) != flags.end()) continue;
    if (std::optional<std::string> c = closest_name(word, flags)) {
      out += "unknown option \"" + word + "\" for " + full_name(at) + ": did you mean \"" + *c +
             "\"?\n";
    } else if (std::string owners = commands_with_option(app, word); !owners.empty()) {
      // `cache clear --max-size 1G`: an option of another action.
      out += word + " is an option of " + owners + ", not of " + full_name(at) + "\n";
    }
  }
  return out;
}

}  // namespace shardproof::cli
