// The docs cannot drift from the tool (issue 26): every option that some
// command's --help lists, and every SHARDPROOF_* environment variable the
// sources read, appears in the docs.
#include <gtest/gtest.h>

#include <filesystem>
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

}  // namespace
