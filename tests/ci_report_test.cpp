// CI output a reviewer can act on (issue 25), through the binary on plans
// `shardproof plan` writes with a known bug: where the bug sits in the mesh
// (the text report's grid: a group bug is a column, a single-rank bug a
// cell, per micro-batch), the step summary GitHub shows, and the HTML page
// as a real headless Chromium renders it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace {

namespace fs = std::filesystem;
using shardproof::testing::CliResult;
using shardproof::testing::shell_quote;
using shardproof::testing::slurp_file;

class ReportMeshTest : public shardproof::testing::ScratchDirTest {
 protected:
  ReportMeshTest() : ScratchDirTest("shardproof_ci_report_") {}

  CliResult cli(const std::string& args) {
    return shardproof::testing::run_cli(args, dir_ / "stderr.txt");
  }
  // `shardproof plan mlp ARGS` written to NAME.
  std::string plan(const std::string& name, const std::string& args) {
    std::string path = (dir_ / name).string();
    CliResult r = cli("plan mlp " + args + " -o " + shell_quote(path));
    EXPECT_EQ(r.code, 0) << r.err;
    return path;
  }
  CliResult verify(const std::string& args) { return cli("verify --no-daemon --quiet " + args); }
  // `plan mlp PLAN_ARGS` (a bug among them), verified: not equivalent.
  CliResult verify_bug(const std::string& plan_args) {
    CliResult r = verify(shell_quote(plan("bug.json", plan_args)));
    EXPECT_EQ(r.code, 1) << r.err << r.out;
    return r;
  }
  // The lines of the text report's grid, without their indentation.
  static std::vector<std::string> grid(const std::string& report) {
    std::vector<std::string> out;
    std::istringstream in(report);
    std::string line;
    bool inside = false;
    while (std::getline(in, line)) {
      if (inside && line.rfind("    ", 0) == 0)
        out.push_back(line.substr(4));
      else if (inside)
        break;
      inside = inside || line == "    X failing, . fine:";
    }
    return out;
  }
  static std::string joined(const std::vector<std::string>& lines) {
    std::string out;
    for (const std::string& l : lines) out += l + "\n";
    return out;
  }

  shardproof::testing::IsolatedEnv env_;
};

// The grids of one bug's tp groups: dp 0's column fails, dp 1's does not.
constexpr const char* kColumnDp0 =
    "pp 0, mb 0\n"
    "     dp 0 1\n"
    "tp 0    X .\n"
    "tp 1    X .\n";

// How many findings the text report's mesh section lists.
size_t finding_lines(const std::string& report) {
  size_t n = 0;
  for (size_t at = report.find("    finding "); at != std::string::npos;
       at = report.find("    finding ", at + 1))
    ++n;
  return n;
}

// A tp group bug: tp ranks 0 and 1 of dp 0 swap their weight shards. Its
// findings (one per stage: each rank's slice is its own stage) are every
// rank of that tp group: a column.
TEST_F(ReportMeshTest, AGroupBugIsAColumn) {
  CliResult r = verify_bug("--dp 2 --tp 2 --bug swapped-shards");
  EXPECT_NE(r.out.find("where in the mesh (pp 1 x dp 2 x tp 2; from meta):"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(": rank 1; class pp=0 dp=0 tp=1"), std::string::npos) << r.out;
  EXPECT_EQ(joined(grid(r.out)), kColumnDp0) << r.out;
}

// A forward all-reduce on one-rank groups (dp 0, micro-batch 0): every tp
// rank of dp 0 goes on with its own partial sum. The stage refutes it by
// testing at its first member; the finding still names the whole group.
TEST_F(ReportMeshTest, AMissingAllReduceMarksTheWholeTpGroup) {
  CliResult r = verify_bug("--dp 2 --tp 4 --layers 2 --bug drop-tp-allreduce");
  EXPECT_NE(r.out.find("finding 1: ranks 0, 1, 2, 3; class pp=0 dp=0 tp=*"), std::string::npos)
      << r.out;
  EXPECT_EQ(finding_lines(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("also failing: dp0.tp1.pp0.mb0.l1.pre, dp0.tp2.pp0.mb0.l1.pre, "
                       "dp0.tp3.pp0.mb0.l1.pre\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(joined(grid(r.out)),
            "pp 0, mb 0\n"
            "     dp 0 1\n"
            "tp 0    X .\n"
            "tp 1    X .\n"
            "tp 2    X .\n"
            "tp 3    X .\n")
      << r.out;
  // The CI formats: one annotation and one SARIF result naming every rank.
  CliResult gh = verify("--format github " + shell_quote((dir_ / "bug.json").string()));
  size_t errors = 0;
  for (size_t at = gh.out.find("::error "); at != std::string::npos;
       at = gh.out.find("::error ", at + 1))
    ++errors;
  EXPECT_EQ(errors, 1u) << gh.out;
  EXPECT_NE(gh.out.find("[ranks 0, 1, 2, 3; class pp=0 dp=0 tp=*"), std::string::npos) << gh.out;
  CliResult sarif = verify("--format sarif " + shell_quote((dir_ / "bug.json").string()));
  EXPECT_NE(sarif.out.find("\"ranks\": [\n"), std::string::npos) << sarif.out;
  EXPECT_NE(sarif.out.find("\"alsoFailing\": ["), std::string::npos) << sarif.out;
  CliResult junit = verify("--format junit " + shell_quote((dir_ / "bug.json").string()));
  EXPECT_NE(junit.out.find("[ranks 0, 1, 2, 3; class pp=0 dp=0 tp=*"), std::string::npos)
      << junit.out;
}

// The gradient of w0 never all-reduced over dp: every rank steps with its
// own. Each tp slice's stage holds both dp ranks' claims: one finding per
// slice, each naming both dp ranks, so the grid is full.
TEST_F(ReportMeshTest, AnUnsyncedGradientFailsAtEveryDpRank) {
  CliResult r = verify_bug("--dp 2 --tp 2 --bug dp-grad-not-synced");
  EXPECT_EQ(finding_lines(r.out), 2u) << r.out;
  EXPECT_NE(r.out.find("finding 1: ranks 0, 2; class pp=0 dp=* tp=0 per device"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("finding 2: ranks 1, 3; class pp=0 dp=* tp=1 per device"), std::string::npos)
      << r.out;
  EXPECT_EQ(joined(grid(r.out)), "pp 0, mb 0\n     dp 0 1\ntp 0    X X\ntp 1    X X\n") << r.out;
}

// Every micro-batch's loss gradient scaled by its own count: each of
// grad.l2.pre's row slices (one per dp rank and micro-batch) is a stage whose
// finding names both tp ranks. Together the findings name all 8 places.
TEST_F(ReportMeshTest, AnEveryMicroBatchBugNamesEveryPlace) {
  std::string p = plan("bug.json",
                       "--dp 2 --tp 2 --microbatches 2 --layers 3 --bug "
                       "loss-scale-wrong-microbatch-count");
  CliResult r = verify("--format json " + shell_quote(p));
  ASSERT_EQ(r.code, 1) << r.err;
  nlohmann::json report = nlohmann::json::parse(r.out);
  std::set<std::string> places;
  size_t findings = 0;
  for (const nlohmann::json& f : report["findings"]) {
    if (f["tensor"] != "grad.l2.pre") continue;
    ++findings;
    for (const auto& t : f["parallel_tensors"]) places.insert(t.get<std::string>());
    for (const auto& t : f.value("also_failing", nlohmann::json::array()))
      places.insert(t.get<std::string>());
  }
  EXPECT_EQ(places.size(), 8u) << r.out;  // dp x tp x mb
  EXPECT_EQ(findings, 4u) << r.out;       // one per row slice, not one per place
}

// A single-rank bug: the pipeline send of dp 0, tp 0, micro-batch 0 carries
// the pre-activation. Exactly one cell: the receiving rank.
TEST_F(ReportMeshTest, ASingleRankBugIsOneCell) {
  CliResult r = verify_bug("--dp 2 --tp 2 --pp 2 --layers 4 --bug pp-send-wrong-tensor");
  EXPECT_NE(r.out.find("finding 1: rank 4; class pp=1 dp=0 tp=0 mb=0"), std::string::npos) << r.out;
  EXPECT_EQ(joined(grid(r.out)), "pp 1, mb 0\n     dp 0 1\ntp 0    X .\ntp 1    . .\n") << r.out;
}

// The gradient of w0 averaged over dp at tp 0: both dp ranks of tp 0 step
// with half their gradient. A row: the dp group at tp 0.
TEST_F(ReportMeshTest, ADpGroupBugIsARow) {
  CliResult r = verify_bug("--dp 2 --tp 2 --bug dp-grad-mean-not-sum");
  EXPECT_NE(r.out.find("finding 1: ranks 0, 2; class pp=0 dp=* tp=0 per device"), std::string::npos)
      << r.out;
  EXPECT_EQ(joined(grid(r.out)), "pp 0, mb 0\n     dp 0 1\ntp 0    X X\ntp 1    . .\n") << r.out;
}

// A schedule bug: the pipeline send of micro-batch 0 carries micro-batch 1's
// activation. One panel of the receiving stage among clean ones.
TEST_F(ReportMeshTest, AMicroBatchBugIsOnePanel) {
  CliResult r =
      verify_bug("--dp 2 --tp 2 --pp 2 --microbatches 2 --layers 4 --bug pp-send-wrong-microbatch");
  EXPECT_NE(r.out.find("(pp 2 x dp 2 x tp 2, 2 micro-batches; from meta)"), std::string::npos)
      << r.out;
  EXPECT_EQ(joined(grid(r.out)),
            "pp 1, mb 0    pp 1, mb 1\n"
            "     dp 0 1        dp 0 1\n"
            "tp 0    X .   tp 0    . .\n"
            "tp 1    . .   tp 1    . .\n")
      << r.out;
}

// The compact form of the same group bug: ranks from its instances' names.
TEST_F(ReportMeshTest, CompactPlansUseTheirMesh) {
  CliResult r = verify_bug("--compact --dp 2 --tp 2 --bug swapped-shards");
  EXPECT_NE(r.out.find("from parallel.mesh"), std::string::npos) << r.out;
  EXPECT_EQ(joined(grid(r.out)), kColumnDp0) << r.out;
}

TEST_F(ReportMeshTest, CorrectPlanHasNoMeshSection) {
  CliResult r = verify(shell_quote(plan("ok.json", "--dp 2 --tp 2")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("where in the mesh"), std::string::npos) << r.out;
}

// A plan without mesh information lists ranks and says so; nothing drawn.
TEST_F(ReportMeshTest, NoMeshInformationIsSaidNotInvented) {
  CliResult r = verify(
      shell_quote((fs::path(SHARDPROOF_SOURCE_DIR) / "examples/tp2-ffn-bug-mean.json").string()));
  ASSERT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.out.find("where in the mesh: the plan has no mesh information"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("finding 1: rank"), std::string::npos) << r.out;
  EXPECT_TRUE(grid(r.out).empty()) << r.out;
}

// The step summary GitHub shows: appended to $GITHUB_STEP_SUMMARY.
TEST_F(ReportMeshTest, StepSummaryIsWrittenWhenTheVariableIsSet) {
  std::string p = plan("bug.json", "--dp 2 --tp 2 --bug dp-grad-mean-not-sum");
  const std::string summary = (dir_ / "summary.md").string();
  std::ofstream(summary) << "earlier step\n";
  CliResult r = cli("verify --no-daemon --quiet --format github " + shell_quote(p));
  EXPECT_EQ(slurp_file(summary), "earlier step\n");  // not set: not written
  setenv("GITHUB_STEP_SUMMARY", summary.c_str(), 1);
  r = cli("verify --no-daemon --quiet --format github " + shell_quote(p));
  unsetenv("GITHUB_STEP_SUMMARY");
  ASSERT_EQ(r.code, 1) << r.err;
  std::string md = slurp_file(summary);
  EXPECT_EQ(md.rfind("earlier step\n### shardproof\n", 0), 0u) << md;  // appended
  EXPECT_NE(md.find("- ❌ " + p + ": NOT EQUIVALENT"), std::string::npos) << md;
  EXPECT_NE(md.find("| " + p + " | mismatch | "), std::string::npos) << md;
  EXPECT_NE(md.find("ranks 0, 2; class pp=0 dp=* tp=0 per device"), std::string::npos) << md;
}

// The HTML page, opened in a real headless Chromium: the DOM it renders
// holds the verdict, the failing cell of the grid, the ops and the phases.
using ReportHtmlTest = ReportMeshTest;

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    std::string cmd = std::string("command -v ") + name + " 2>/dev/null";
    FILE* pipe = popen(cmd.c_str(), "r");
    char buf[512] = {0};
    std::string path = pipe && fgets(buf, sizeof buf, pipe) ? buf : "";
    if (pipe) pclose(pipe);
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.pop_back();
    if (!path.empty()) return path;
  }
  return "";
}

// Chromium's flags for a sandbox-less, offline, throwaway profile run.
std::string chromium_command(const std::string& chromium, const fs::path& profile) {
  return "timeout 120 " + shell_quote(chromium) +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
         " --disable-background-networking --disable-component-update --disable-sync"
         " --user-data-dir=" +
         shell_quote(profile.string());
}

TEST_F(ReportHtmlTest, SelfContainedPageRendersTheFailingCell) {
  std::string p = plan("bug.json", "--dp 2 --tp 2 --layers 2 --bug drop-tp-allreduce");
  const fs::path page = dir_ / "report.html";
  CliResult r = verify("--output html=" + shell_quote(page.string()) + " " + shell_quote(p));
  ASSERT_EQ(r.code, 1) << r.err;
  const std::string html = slurp_file(page);
  ASSERT_FALSE(html.empty());
  // Self-contained: nothing to fetch.
  for (const char* external : {"<script", "<link", "src=", "url(", "@import", "http://"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;

  const std::string chromium = find_chromium();
  if (chromium.empty())
    GTEST_SKIP() << "chromium is not installed (Debian package chromium; scripts/setup.sh): "
                    "the page was written but not rendered";
  const fs::path profile = dir_ / "profile", dom = dir_ / "dom.html";
  std::string cmd = chromium_command(chromium, profile) + " --dump-dom " +
                    shell_quote("file://" + page.string()) + " >" + shell_quote(dom.string()) +
                    " 2>" + shell_quote((dir_ / "chromium.err").string());
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp_file(dir_ / "chromium.err");
  const std::string rendered = slurp_file(dom);
  EXPECT_NE(rendered.find("id=\"verdict\">not-equivalent</span>"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("<td class=\"fail\" title=\"failing: pp 0, mb 0, tp 0, dp 0\">X</td>"),
            std::string::npos)
      << rendered;
  // The whole tp group of dp 0 (one finding), and nothing of dp 1.
  EXPECT_NE(rendered.find("<td class=\"fail\" title=\"failing: pp 0, mb 0, tp 1, dp 0\">X</td>"),
            std::string::npos)
      << rendered;
  EXPECT_NE(rendered.find("<td class=\"ok\" title=\"pp 0, mb 0, tp 1, dp 1\"></td>"),
            std::string::npos);
  EXPECT_EQ(rendered.find("failing: pp 0, mb 0, tp 0, dp 1"), std::string::npos);
  EXPECT_NE(rendered.find("Time per phase"), std::string::npos);
  EXPECT_NE(rendered.find("<h4>logical</h4>"), std::string::npos);
  EXPECT_NE(rendered.find("<h4>parallel</h4>"), std::string::npos);
  EXPECT_EQ(rendered.find("(not found in the plan)"), std::string::npos) << rendered;

  // A screenshot, for a person to look at (kept when SHARDPROOF_KEEP_SCREENSHOT names a path).
  const fs::path shot = dir_ / "page.png";
  cmd = chromium_command(chromium, profile) +
        " --window-size=1200,1400 --screenshot=" + shell_quote(shot.string()) + " " +
        shell_quote("file://" + page.string()) + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_GT(fs::file_size(shot), 1000u);
  if (const char* keep = std::getenv("SHARDPROOF_KEEP_SCREENSHOT"))
    fs::copy_file(shot, keep, fs::copy_options::overwrite_existing);
}

}  // namespace
