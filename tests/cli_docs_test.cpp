// The docs cannot drift from the tool (issue 26): every option that some
// command's --help lists, and every SHARDPROOF_* environment variable the
// sources read, appears in the docs.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/cli_runner.h"

namespace {

namespace fs = std::filesystem;
const fs::path kSource = SHARDPROOF_SOURCE_DIR;

class CliDocsTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliDocsTest() : ScratchDirTest("shardproof_cli_docs_") {}

  std::string help(const std::string& command) {
    auto r = shardproof::testing::run_cli("help " + command, dir_ / "err");
    EXPECT_EQ(r.code, 0) << command << ": " << r.err;
    return r.out;
  }

  // The names listed under "Subcommands:" in a help text.
  static std::vector<std::string> subcommands(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
      if (line == "Subcommands:") {
        inside = true;
      } else if (inside && line.rfind("  ", 0) == 0) {
        std::string name = line.substr(2, line.find(' ', 2) - 2);
        if (!name.empty()) out.push_back(name);
      } else if (inside && !line.empty()) {
        inside = false;
      }
    }
    return out;
  }
};

TEST_F(CliDocsTest, EveryOptionOfEveryCommandIsInCliMd) {
  const std::string docs = shardproof::testing::slurp_file(kSource / "docs" / "cli.md");
  std::vector<std::string> todo = subcommands(help(""));
  ASSERT_GE(todo.size(), 8u);
  std::set<std::string> seen;
  const std::regex flag("(--[a-z][a-z0-9-]*)");
  for (size_t i = 0; i < todo.size(); ++i) {
    const std::string& command = todo[i];
    if (!seen.insert(command).second || command == "help") continue;
    SCOPED_TRACE(command);
    if (command.find(' ') == std::string::npos) {
      EXPECT_NE(docs.find("shardproof " + command), std::string::npos) << "no synopsis";
    }
    std::string text = help(command);
    for (const std::string& sub : subcommands(text)) todo.push_back(command + " " + sub);
    for (std::sregex_iterator it(text.begin(), text.end(), flag), end; it != end; ++it) {
      std::string f = (*it)[1];
      if (f == "--help") continue;
      // As an option in a table or synopsis: `--x`, `--x N`, [--x ...].
      bool documented = docs.find("`" + f + "`") != std::string::npos ||
                        docs.find("`" + f + " ") != std::string::npos ||
                        docs.find("[" + f + " ") != std::string::npos ||
                        docs.find("[" + f + "]") != std::string::npos;
      EXPECT_TRUE(documented) << f << " of `shardproof " << command << "` is not in docs/cli.md";
    }
  }
}

TEST_F(CliDocsTest, EveryEnvironmentVariableIsDocumented) {
  std::string docs;
  for (const auto& e : fs::directory_iterator(kSource / "docs"))
    if (e.path().extension() == ".md") docs += shardproof::testing::slurp_file(e.path());
  const std::regex var("\"(SHARDPROOF_[A-Z_]+)\"");
  int found = 0;
  for (const char* room : {"cli", "cache", "daemon", "engine", "hooks", "planner"}) {
    for (const auto& e : fs::recursive_directory_iterator(kSource / room)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".h") continue;
      std::string text = shardproof::testing::slurp_file(e.path());
      for (std::sregex_iterator it(text.begin(), text.end(), var), end; it != end; ++it) {
        ++found;
        EXPECT_NE(docs.find((*it)[1]), std::string::npos)
            << (*it)[1] << " (read in " << e.path() << ") is in no docs/*.md";
      }
    }
  }
  EXPECT_GE(found, 10);
}

// Every key the plan reader accepts: the lists its check_keys calls allow
// (an unknown key is refused with them), each in docs/plan-format.md.
TEST_F(CliDocsTest, EveryPlanKeyIsInPlanFormatMd) {
  const std::string docs = shardproof::testing::slurp_file(kSource / "docs" / "plan-format.md");
  const std::regex call(R"(check_keys\(\s*\w+\s*,\s*\{([^}]*)\})");
  const std::regex key("\"([A-Za-z_][A-Za-z0-9_]*)\"");
  int calls = 0;
  std::set<std::string> keys;
  for (const auto& e : fs::recursive_directory_iterator(kSource / "engine")) {
    if (e.path().extension() != ".cpp") continue;
    std::string text = shardproof::testing::slurp_file(e.path());
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
      ++calls;
      std::string list = (*it)[1];
      for (std::sregex_iterator k(list.begin(), list.end(), key); k != end; ++k) {
        std::string name = (*k)[1];
        if (!keys.insert(name).second) continue;
        EXPECT_TRUE(docs.find("`" + name + "`") != std::string::npos ||
                    docs.find("\"" + name + "\"") != std::string::npos)
            << "plan key \"" << name << "\" (allowed in " << e.path()
            << ") is not in docs/plan-format.md";
      }
    }
  }
  EXPECT_GE(calls, 12) << "the check_keys calls were not found: has the reader changed?";
  EXPECT_GE(keys.size(), 40u);
}

// The `plan` table of cli.md is `shardproof plan --help`: the same options,
// the defaults the help shows, and no option the command does not have. And
// the planner's own pages name only options that exist.
TEST_F(CliDocsTest, PlanOptionsTableIsPlanHelp) {
  const std::string help_text = help("plan");
  // "  --dp INT:INT in [1 - 1048576]=1": the default follows the type and
  // range after "=".
  const std::regex option_line(R"(^\s+(?:-\w,)?(--[a-z][a-z0-9-]*)(.*)$)");
  const std::regex shown_default(R"(^ \S+(?: in \[[^\]]*\])?=(\S+))");
  std::map<std::string, std::string> options;  // --flag -> its default ("" when none shown)
  std::istringstream in(help_text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m, d;
    if (!std::regex_search(line, m, option_line) || m[1] == "--help") continue;
    const std::string rest = m[2];
    options[m[1]] = std::regex_search(rest, d, shown_default) ? std::string(d[1]) : "";
  }
  ASSERT_GE(options.size(), 20u) << help_text;

  const std::string cli = shardproof::testing::slurp_file(kSource / "docs" / "cli.md");
  const size_t from = cli.find("## `plan`");
  ASSERT_NE(from, std::string::npos);
  const std::string section = cli.substr(from, cli.find("\n## ", from + 1) - from);
  // "| `--dp N`, `--tp N`, `--pp N` | 1 | ..." -> each flag of the first cell, and the second cell.
  std::map<std::string, std::string> table;
  std::istringstream rows(section);
  const std::regex flag("`(?:-\\w, )?(--[a-z][a-z0-9-]*)");
  for (std::string row; std::getline(rows, row);) {
    if (row.rfind("| `", 0) != 0) continue;
    const size_t first = row.find(" | "), second = row.find(" | ", first + 3);
    const std::string cell = row.substr(0, first);
    std::string value = row.substr(first + 3, second - first - 3);
    for (std::sregex_iterator it(cell.begin(), cell.end(), flag), end; it != end; ++it)
      table[(*it)[1]] = value;
  }
  for (const auto& [option, value] : options) {
    auto row = table.find(option);
    if (row == table.end()) {
      ADD_FAILURE() << option << " of `shardproof plan --help` has no row in cli.md's plan table";
      continue;
    }
    if (!value.empty()) {
      EXPECT_EQ(row->second, value) << option << ": cli.md's default is not --help's";
    }
  }
  for (const auto& [option, value] : table) {
    EXPECT_TRUE(options.count(option)) << option << " is in cli.md's plan table, not in --help";
  }

  for (const char* page : {"planner.md", "planner-moe.md"}) {
    const std::string text = shardproof::testing::slurp_file(kSource / "docs" / page);
    const std::regex mentioned("`(--[a-z][a-z0-9-]*)");
    for (std::sregex_iterator it(text.begin(), text.end(), mentioned), end; it != end; ++it) {
      EXPECT_TRUE(options.count((*it)[1]))
          << page << " names " << (*it)[1] << ", which `shardproof plan` does not have";
    }
  }
}

}  // namespace
