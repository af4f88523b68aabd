// `cmake --install` (issue 26): the binary, a man page written from the
// help texts, bash and zsh completion and the docs land in the usual
// places, and the installed binary runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli_runner.h"

namespace {

namespace fs = std::filesystem;

class CliInstallTest : public shardproof::testing::ScratchDirTest {
 protected:
  CliInstallTest() : ScratchDirTest("shardproof_cli_install_") {}
};

TEST_F(CliInstallTest, InstallsBinaryManPageCompletionAndDocs) {
  const fs::path build = fs::path(SHARDPROOF_CLI).parent_path();  // CMAKE_RUNTIME_OUTPUT_DIRECTORY
  ASSERT_TRUE(fs::exists(build / "CMakeCache.txt")) << build;
  const fs::path prefix = dir_ / "prefix";
  std::string cmd = "cmake --install " + shardproof::testing::shell_quote(build.string()) +
                    " --prefix " + shardproof::testing::shell_quote(prefix.string()) +
                    " >/dev/null 2>" + shardproof::testing::shell_quote((dir_ / "err").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << shardproof::testing::slurp_file(dir_ / "err");

  EXPECT_TRUE(fs::exists(prefix / "bin" / "shardproof"));
  const fs::path man = prefix / "share" / "man" / "man1" / "shardproof.1";
  ASSERT_TRUE(fs::exists(man));
  std::string page = shardproof::testing::slurp_file(man);
  EXPECT_EQ(page.rfind(".TH SHARDPROOF 1", 0), 0u) << page.substr(0, 200);
  // The same text as --help: every command and one of verify's options.
  for (const char* part : {".SS shardproof verify", ".SS shardproof daemon cancel",
                           ".SS shardproof cache gc", "--timeout-ms", "--max-size"})
    EXPECT_NE(page.find(part), std::string::npos) << part;
  EXPECT_TRUE(fs::exists(prefix / "share" / "bash-completion" / "completions" / "shardproof"));
  EXPECT_TRUE(fs::exists(prefix / "share" / "doc" / "shardproof" / "cli.md"));
  EXPECT_TRUE(fs::exists(prefix / "share" / "shardproof" / "frontends" / "torch" /
                         "shardproof_torch" / "__init__.py"));

  // The completion asks the binary: commands, subcommands, then options.
  auto complete = [&](const std::string& words, int cword) {
    std::string script =
        "source " + (prefix / "share" / "bash-completion" / "completions" / "shardproof").string() +
        "; COMP_WORDS=(" + (prefix / "bin" / "shardproof").string() + " " + words +
        "); COMP_CWORD=" + std::to_string(cword) + "; _shardproof; echo \"${COMPREPLY[*]}\"";
    std::string c = "bash -c " + shardproof::testing::shell_quote(script) + " >" +
                    shardproof::testing::shell_quote((dir_ / "out").string());
    EXPECT_EQ(std::system(c.c_str()), 0);
    return shardproof::testing::slurp_file(dir_ / "out");
  };
  EXPECT_EQ(complete("veri", 1), "verify\n");
  EXPECT_EQ(complete("cache g", 2), "gc\n");
  EXPECT_EQ(complete("cache gc --max-s", 3), "--max-size\n");

  // zsh: the same questions to the binary. Outside a completion widget,
  // compadd and _files are stand-ins that print what they were given.
  const fs::path zsh_completion = prefix / "share" / "zsh" / "site-functions" / "_shardproof";
  ASSERT_TRUE(fs::exists(zsh_completion));
  ASSERT_EQ(std::system("command -v zsh >/dev/null"), 0)
      << "zsh is missing (scripts/setup.sh installs it)";
  EXPECT_EQ(
      std::system(("zsh -n " + shardproof::testing::shell_quote(zsh_completion.string())).c_str()),
      0);
  auto zsh_complete = [&](const std::string& words, int current) {
    std::string script =
        "compadd() { [[ $1 == -a ]] && print -l -- ${(P)2} | grep -x -- \"${words[CURRENT]}.*\"; "
        "}; _files() { print FILES; }; words=(" +
        (prefix / "bin" / "shardproof").string() + " " + words +
        "); CURRENT=" + std::to_string(current) + "; source " + zsh_completion.string();
    std::string c = "zsh -f -c " + shardproof::testing::shell_quote(script) + " >" +
                    shardproof::testing::shell_quote((dir_ / "out").string());
    EXPECT_EQ(std::system(c.c_str()), 0) << words;
    return shardproof::testing::slurp_file(dir_ / "out");
  };
  EXPECT_EQ(zsh_complete("veri", 2), "verify\n");
  EXPECT_EQ(zsh_complete("cache g", 3), "gc\n");
  EXPECT_EQ(zsh_complete("cache gc --max-s", 4), "--max-size\n");
  EXPECT_EQ(zsh_complete("verify --no-da", 3), "--no-daemon\n");

  auto r = shardproof::testing::run_cli("version", dir_ / "err");
  auto installed =
      std::system((shardproof::testing::shell_quote((prefix / "bin" / "shardproof").string()) +
                   " version >/dev/null")
                      .c_str());
  EXPECT_EQ(installed, 0);
  EXPECT_EQ(r.code, 0);
}

}  // namespace
