// The pieces of `shardproof hooks` that need no git: glob patterns,
// .shardproof.json, telling plans from other JSON, which plans a change
// selects (and that an unrelated change reads nothing), and installing the
// hook script beside an existing one. The hook end to end, in real
// repositories, is tests/hooks_e2e.sh.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "hooks/glob.h"
#include "hooks/install.h"
#include "hooks/plan_scan.h"
#include "hooks/process.h"
#include "hooks/repo_config.h"
#include "hooks/selection.h"

namespace shardproof::hooks {
namespace {

namespace fs = std::filesystem;

TEST(HooksGlob, StarStaysInOneSegment) {
  EXPECT_TRUE(glob_match("configs/*.yaml", "configs/a.yaml"));
  EXPECT_FALSE(glob_match("configs/*.yaml", "configs/x/a.yaml"));
  EXPECT_FALSE(glob_match("*.json", "plans/a.json"));
  EXPECT_TRUE(glob_match("*.json", "a.json"));
  EXPECT_TRUE(glob_match("plans/?.json", "plans/a.json"));
  EXPECT_TRUE(glob_match("plans/[ab].json", "plans/b.json"));
  EXPECT_FALSE(glob_match("plans/[ab].json", "plans/c.json"));
}

TEST(HooksGlob, DoubleStarSpansSegments) {
  EXPECT_TRUE(glob_match("configs/**/*.yaml", "configs/a.yaml"));
  EXPECT_TRUE(glob_match("configs/**/*.yaml", "configs/x/y/a.yaml"));
  EXPECT_TRUE(glob_match("**/*.json", "a.json"));
  EXPECT_TRUE(glob_match("**/*.json", "a/b/c.json"));
  EXPECT_TRUE(glob_match("tests/**", "tests/data/x.json"));
  EXPECT_FALSE(glob_match("tests/**", "src/tests/x.json"));
  EXPECT_TRUE(glob_match("**", "anything/at/all"));
}

TEST(HooksPlanScan, FormatVersions) {
  EXPECT_TRUE(is_plan_format("shardproof-plan/1"));
  EXPECT_TRUE(is_plan_format("shardproof-plan/1.1"));
  EXPECT_TRUE(is_plan_format("shardproof-plan/1.12"));
  EXPECT_FALSE(is_plan_format("shardproof-plan/10"));
  EXPECT_FALSE(is_plan_format("shardproof-plan/1."));
  EXPECT_FALSE(is_plan_format("shardproof-plan/2"));
  EXPECT_FALSE(is_plan_format("shardproof-plan"));
}

TEST(HooksPlanScan, TopLevelKeysOnly) {
  PlanHeader h = scan_plan_header(
      R"({"name": "x", "format": "shardproof-plan/1", "logical": "../g/l.json",
          "parallel": {"format": "nested", "logical": "not a ref"}})");
  EXPECT_TRUE(h.is_plan);
  EXPECT_EQ(h.graph_refs, std::vector<std::string>{"../g/l.json"});

  EXPECT_FALSE(scan_plan_header(R"({"meta": {"format": "shardproof-plan/1"}})").is_plan);
  EXPECT_FALSE(scan_plan_header(R"({"format": "something-else", "logical": "a.json"})").is_plan);
  EXPECT_TRUE(scan_plan_header(R"({"logical": "l.json", "format": "shardproof-plan/1.1"})")
                  .graph_refs.size() == 1);
  EXPECT_FALSE(scan_plan_header("[1, 2, 3]").is_plan);
  EXPECT_FALSE(scan_plan_header("").is_plan);
  // Broken after the format: still a plan, so verify gets to say what is wrong.
  EXPECT_TRUE(scan_plan_header(R"({"format": "shardproof-plan/1", "logical": {)").is_plan);
  // \u escapes spell the format too.
  EXPECT_TRUE(scan_plan_header(R"({"format": "shardproof-plan\u002f1"})").is_plan);
}

TEST(HooksPlanScan, GraphReferencesResolveInTheRepository) {
  EXPECT_EQ(resolve_graph_ref("plans/a.json", "../graphs/g.json"), "graphs/g.json");
  EXPECT_EQ(resolve_graph_ref("a.json", "g/./x.json"), "g/x.json");
  EXPECT_EQ(resolve_graph_ref("plans/a.json", "x.json"), "plans/x.json");
  EXPECT_EQ(resolve_graph_ref("plans/a.json", "/abs/g.json"), std::nullopt);
  EXPECT_EQ(resolve_graph_ref("plans/a.json", "../../outside.json"), std::nullopt);
}

TEST(HooksConfig, ParsesRules) {
  std::string error;
  auto c = parse_repo_config(R"({
    "// note": "comments are keys starting with //",
    "exclude": ["tests/**"],
    "unknown": "warn",
    "regenerate": [{"configs": ["parallel/*.yaml"], "command": "gen {config} -o {plan}",
                    "plan": "plans/{stem}.json", "run_in": "worktree"}]})",
                             &error);
  ASSERT_TRUE(c) << error;
  EXPECT_EQ(c->exclude, std::vector<std::string>{"tests/**"});
  EXPECT_FALSE(c->block_unknown);
  ASSERT_EQ(c->regenerate.size(), 1u);
  EXPECT_TRUE(c->regenerate[0].in_worktree);
  EXPECT_EQ(c->regenerate[0].plan, "plans/{stem}.json");

  auto defaults = parse_repo_config("{}", &error);
  ASSERT_TRUE(defaults);
  EXPECT_TRUE(defaults->block_unknown);
}

TEST(HooksConfig, RejectsWhatWouldSilentlyDisableACheck) {
  std::string error;
  EXPECT_FALSE(parse_repo_config(R"({"exclude": ["a"], "unknwon": "warn"})", &error));
  EXPECT_NE(error.find("unknwon"), std::string::npos) << error;
  EXPECT_FALSE(parse_repo_config(R"({"unknown": "pass"})", &error));
  EXPECT_FALSE(parse_repo_config(R"({"regenerate": [{"configs": ["a"], "plan": "p"}]})", &error));
  EXPECT_NE(error.find("command"), std::string::npos) << error;
  EXPECT_FALSE(parse_repo_config(
      R"({"regenerate": [{"configs": [], "command": "c", "plan": "p"}]})", &error));
  EXPECT_FALSE(parse_repo_config("not json", &error));
  EXPECT_FALSE(parse_repo_config("[]", &error));
}

TEST(HooksConfig, PlaceholdersAreQuotedInCommands) {
  EXPECT_EQ(expand_placeholders("plans/{stem}.json", "cfg/it's.yaml", "", false),
            "plans/it's.json");
  EXPECT_EQ(expand_placeholders("gen {config} -o {plan} # {dir}", "cfg/it's.yaml",
                                "plans/it's.json", true),
            "gen 'cfg/it'\\''s.yaml' -o 'plans/it'\\''s.json' # 'cfg'");
  EXPECT_EQ(expand_placeholders("{dir}", "top.yaml", "", false), ".");
}

// A tree in memory that counts what is read from it.
class FakeTree : public TreeReader {
 public:
  std::map<std::string, std::string> files;
  int reads = 0, scans = 0;

  std::map<std::string, std::optional<std::string>> read(
      const std::vector<std::string>& paths) override {
    ++reads;
    std::map<std::string, std::optional<std::string>> out;
    for (const std::string& p : paths) {
      auto it = files.find(p);
      out[p] = it == files.end() ? std::nullopt : std::optional<std::string>(it->second);
    }
    return out;
  }
  std::vector<std::string> plan_candidates() override {
    ++scans;
    std::vector<std::string> out;
    for (const auto& [path, text] : files)
      if (text.find("shardproof-plan/1") != std::string::npos) out.push_back(path);
    return out;
  }
};

const char* kInlinePlan = R"({"format": "shardproof-plan/1", "logical": {}, "parallel": {}})";
const char* kRefPlan =
    R"({"format": "shardproof-plan/1", "logical": "../graphs/l.json", "parallel": {}})";

TEST(HooksSelection, UnrelatedChangesReadNothing) {
  FakeTree tree;
  tree.files["plans/a.json"] = kInlinePlan;
  RepoConfig config;
  config.regenerate.push_back({{"parallel/*.yaml"}, "gen", "plans/x.json", false});
  Selection s = select_plans({{"README.md", false}, {"src/train.py", false}, {"x.yaml", false}},
                             config, tree);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(tree.reads, 0);
  EXPECT_EQ(tree.scans, 0);
}

TEST(HooksSelection, ChangedPlansAreSelectedWithoutAScan) {
  FakeTree tree;
  tree.files["plans/a.json"] = kRefPlan;
  tree.files["plans/b.json"] = kInlinePlan;
  Selection s = select_plans({{"plans/a.json", false}}, RepoConfig{}, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].path, "plans/a.json");
  EXPECT_EQ(s.plans[0].reason, "changed");
  EXPECT_EQ(s.plans[0].graphs, std::vector<std::string>{"graphs/l.json"});
  EXPECT_EQ(tree.scans, 0);
}

TEST(HooksSelection, AChangedOrDeletedGraphSelectsThePlansThatReferenceIt) {
  FakeTree tree;
  tree.files["plans/a.json"] = kRefPlan;
  tree.files["plans/b.json"] = kInlinePlan;
  tree.files["graphs/l.json"] = R"({"tensors": {}})";
  tree.files[".shardproof.json"] = "{}";
  Selection s = select_plans({{"graphs/l.json", false}}, RepoConfig{}, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].path, "plans/a.json");
  EXPECT_EQ(s.plans[0].reason, "references graphs/l.json");

  tree.files.erase("graphs/l.json");
  s = select_plans({{"graphs/l.json", true}}, RepoConfig{}, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].path, "plans/a.json");

  // The configuration file is JSON but no graph: no scan.
  tree.scans = 0;
  EXPECT_TRUE(select_plans({{".shardproof.json", false}}, RepoConfig{}, tree).empty());
  EXPECT_EQ(tree.scans, 0);
}

TEST(HooksSelection, ExcludeAndRegenerate) {
  FakeTree tree;
  tree.files["plans/a.json"] = kInlinePlan;
  tree.files["tests/fixtures/bad.json"] = kInlinePlan;
  RepoConfig config;
  config.exclude = {"tests/**"};
  config.regenerate.push_back(
      {{"parallel/*.yaml"}, "gen {config} -o {plan}", "plans/{stem}.json", false});
  Selection s = select_plans({{"plans/a.json", false},
                              {"tests/fixtures/bad.json", false},
                              {"parallel/llama.yaml", false},
                              {"parallel/gone.yaml", true}},
                             config, tree);
  ASSERT_EQ(s.plans.size(), 1u);
  EXPECT_EQ(s.plans[0].path, "plans/a.json");
  ASSERT_EQ(s.jobs.size(), 1u);
  EXPECT_EQ(s.jobs[0].config, "parallel/llama.yaml");
  EXPECT_EQ(s.jobs[0].plan, "plans/llama.json");
  EXPECT_EQ(s.jobs[0].command, "gen 'parallel/llama.yaml' -o 'plans/llama.json'");
}

TEST(HooksProcess, FeedsStdinAndCollectsBothOutputs) {
  ProcessOptions o;
  o.input = std::string(1 << 20, 'x');  // more than a pipe holds
  ProcessResult r = run_process({"/bin/sh", "-c", "wc -c; echo oops >&2; exit 3"}, o);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "1048576\n");
  EXPECT_EQ(r.err, "oops\n");
  r = run_process({"/nonexistent/program"});
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_NE(r.err.find("cannot run /nonexistent/program"), std::string::npos) << r.err;
  o = {};
  o.merge_stderr = true;
  o.cwd = "/";
  r = run_process({"/bin/sh", "-c", "pwd; echo e >&2"}, o);
  EXPECT_EQ(r.out, "/\ne\n");
}

class HooksInstall : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sp-hooks-XXXXXX";
    ASSERT_TRUE(mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    fs::permissions(dir_ / name, fs::perms(0755));
  }
  fs::path dir_;
};

TEST_F(HooksInstall, FreshInstallIsIdempotentAndUninstalls) {
  std::string message;
  ASSERT_TRUE(install_hook(dir_ / "hooks", "/opt/it's/shardproof", &message).ok());
  std::string script = read("hooks/pre-commit");
  EXPECT_NE(script.find(kHookMarker), std::string::npos);
  EXPECT_NE(script.find("installed_bin='/opt/it'\\''s/shardproof'"), std::string::npos);
  EXPECT_TRUE((fs::status(dir_ / "hooks/pre-commit").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
  ASSERT_TRUE(install_hook(dir_ / "hooks", "/opt/it's/shardproof", &message).ok());
  EXPECT_NE(message.find("already installed"), std::string::npos) << message;
  EXPECT_EQ(read("hooks/pre-commit"), script);
  ASSERT_TRUE(install_hook(dir_ / "hooks", "/usr/bin/shardproof", &message).ok());
  EXPECT_NE(message.find("updated"), std::string::npos) << message;
  ASSERT_TRUE(uninstall_hook(dir_ / "hooks", &message).ok());
  EXPECT_FALSE(fs::exists(dir_ / "hooks/pre-commit"));
  EXPECT_FALSE(fs::exists(dir_ / "hooks/pre-commit.local"));
}

TEST_F(HooksInstall, AnExistingHookIsKeptAndRestored) {
  write("pre-commit", "#!/bin/sh\necho mine\n");
  std::string message;
  ASSERT_TRUE(install_hook(dir_, "/usr/bin/shardproof", &message).ok());
  EXPECT_NE(message.find("pre-commit.local"), std::string::npos) << message;
  EXPECT_EQ(read("pre-commit.local"), "#!/bin/sh\necho mine\n");
  EXPECT_NE(read("pre-commit").find(kHookMarker), std::string::npos);
  // Again: the kept hook is not overwritten by ours.
  ASSERT_TRUE(install_hook(dir_, "/usr/bin/shardproof", &message).ok());
  EXPECT_EQ(read("pre-commit.local"), "#!/bin/sh\necho mine\n");
  ASSERT_TRUE(uninstall_hook(dir_, &message).ok());
  EXPECT_EQ(read("pre-commit"), "#!/bin/sh\necho mine\n");
  EXPECT_FALSE(fs::exists(dir_ / "pre-commit.local"));
  // A foreign hook is left alone by uninstall.
  ASSERT_TRUE(uninstall_hook(dir_, &message).ok());
  EXPECT_EQ(read("pre-commit"), "#!/bin/sh\necho mine\n");
}

TEST(HooksPreCommitFramework, AdviceNamesTheHookOrSaysItIsListed) {
  std::string advice = pre_commit_framework_advice("repos:\n  - repo: local\n", "1.2.3");
  EXPECT_NE(advice.find("no git hook installed"), std::string::npos) << advice;
  EXPECT_NE(advice.find("      - id: shardproof-verify\n"), std::string::npos) << advice;
  EXPECT_NE(advice.find("rev: v1.2.3"), std::string::npos) << advice;
  EXPECT_NE(advice.find("pre-commit install"), std::string::npos) << advice;
  advice = pre_commit_framework_advice("hooks:\n  - id: shardproof-verify\n", "1.2.3");
  EXPECT_NE(advice.find("already listed"), std::string::npos) << advice;
  EXPECT_EQ(advice.find("rev:"), std::string::npos) << advice;
}

TEST_F(HooksInstall, RefusesWhenBothNamesAreTaken) {
  write("pre-commit", "#!/bin/sh\necho one\n");
  write("pre-commit.local", "#!/bin/sh\necho two\n");
  std::string message;
  EXPECT_FALSE(install_hook(dir_, "/usr/bin/shardproof", &message).ok());
  EXPECT_EQ(read("pre-commit"), "#!/bin/sh\necho one\n");
  EXPECT_EQ(read("pre-commit.local"), "#!/bin/sh\necho two\n");
}

}  // namespace
}  // namespace shardproof::hooks
