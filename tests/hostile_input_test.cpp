// Hostile input below the CLI (issue 22): compact expressions that are too
// deep, too long or overflow are errors, not crashes or wrapped values; a
// small compact plan that would expand to gigabytes is never expanded; file
// reads refuse devices and cap their size; graph references stay in the
// plan's tree, symlinks followed; the daemon's memory budget queues.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "daemon/memory_budget.h"
#include "engine/format/compact/compact_expr.h"
#include "engine/format/file_text.h"
#include "engine/format/plan_parser.h"
#include "tests/cli_runner.h"

namespace shardproof {
namespace {

namespace fs = std::filesystem;
using compact::ExprError;

const compact::AxisMask kAll = (1u << compact::kAxisCount) - 1;

std::string expr_error(const std::string& text) {
  try {
    compact::parse_affine(text, kAll);
  } catch (const ExprError& e) {
    return e.rule + ": " + e.message;
  }
  return "";
}

TEST(HostileExpressions, DepthAndLengthAreBounded) {
  EXPECT_EQ(expr_error(std::string(60, '(') + "dp" + std::string(60, ')')), "");
  EXPECT_NE(expr_error(std::string(100, '(') + "dp" + std::string(100, ')')).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(expr_error(std::string(100, '-') + "dp").find("nested deeper"), std::string::npos);
  // 20,000 parentheses and 40,000 signs overflowed the stack.
  EXPECT_NE(
      expr_error(std::string(20000, '(') + "dp" + std::string(20000, ')')).find("longer than"),
      std::string::npos);
  EXPECT_NE(expr_error(std::string(40000, '-') + "dp").find("longer than"), std::string::npos);
  try {
    compact::parse_template("x{" + std::string(5000, '-') + "dp}", kAll);
    ADD_FAILURE() << "a long template was read";
  } catch (const ExprError& e) {
    EXPECT_EQ(e.rule, "compact-expr");
  }
}

TEST(HostileExpressions, ArithmeticNeverWraps) {
  const std::string two40 = "1099511627776";
  EXPECT_EQ(compact::parse_affine(two40, kAll).constant, int64_t{1} << 40);
  EXPECT_EQ(compact::parse_affine("1048576*1048576", kAll).constant, int64_t{1} << 40);
  // 2^40 * 2^40 wrapped to 0 and a nonsense plan verified equivalent.
  EXPECT_NE(expr_error(two40 + "*" + two40).find("beyond 2^40"), std::string::npos);
  EXPECT_NE(expr_error("1048576*1048576*1048576*16").find("beyond 2^40"), std::string::npos);
  EXPECT_NE(expr_error("dp*" + two40 + "*" + two40).find("beyond 2^40"), std::string::npos);
  EXPECT_NE(expr_error("-" + two40 + "*-" + two40).find("beyond 2^40"), std::string::npos);
  // A condition's difference stays within 2^40 too: evaluation fits in int64.
  EXPECT_THROW(compact::parse_condition(two40 + "*dp == -" + two40 + "*dp", kAll), ExprError);
}

TEST(HostileCompactPlan, SmallPlanThatWouldExpandToGigabytesIsNotExpanded) {
  nlohmann::json p = nlohmann::json::parse(shardproof::testing::slurp_file(
      fs::path(SHARDPROOF_SOURCE_DIR) / "examples" / "compact-dp2-tp2-mb2.json"));
  // Under the instance limit, over the memory budget: 47 s and 1.4 GB to expand.
  p["parallel"]["mesh"] =
      nlohmann::json::parse(R"({"axes": [["dp", 1000], ["tp", 1]], "mb": 130})");
  ParseResult r = parse_plan_text(p.dump(), "plan.json", "");
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  EXPECT_TRUE(r.plan->compact) << "kept for the class verifier";
  EXPECT_TRUE(r.plan->parallel.ops.empty());
}

class FileReadTest : public shardproof::testing::ScratchDirTest {
 protected:
  FileReadTest() : ScratchDirTest("sp_files_") {}
};

TEST_F(FileReadTest, DevicesAreRefusedAndSizesCapped) {
  std::string error;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(read_file_text("/dev/zero", &error));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_NE(error.find("device"), std::string::npos) << error;
  fs::path big = file("big.json", std::string(5000, ' '));
  setenv("SHARDPROOF_MAX_FILE_BYTES", "4K", 1);
  EXPECT_FALSE(read_file_text(big.string(), &error));
  EXPECT_NE(error.find("more than 4096 bytes"), std::string::npos) << error;
  unsetenv("SHARDPROOF_MAX_FILE_BYTES");
  EXPECT_EQ(read_file_text(big.string())->size(), 5000u);
  // A pipe is read to its end (process substitution, /dev/stdin), also when
  // its writer has written everything and gone before the first read (once
  // a hang on a quiet machine: the data was dropped, the reader waited).
  fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (int round = 0; round < 20; ++round) {
    std::thread writer([&] { std::ofstream(fifo) << "{\"piped\": true}"; });
    std::optional<std::string> piped = read_file_text(fifo.string(), &error);
    writer.join();
    ASSERT_TRUE(piped) << error;
    EXPECT_EQ(*piped, "{\"piped\": true}") << "round " << round;
  }
}

TEST_F(FileReadTest, GraphReferencesStayInThePlansTree) {
  fs::create_directories(dir_ / "plans" / "graphs");
  file("plans/graphs/g.json", "{}");
  file("outside.json", "{}");
  const std::string base = (dir_ / "plans").string();
  std::string why;
  EXPECT_TRUE(graph_file_path(base, "graphs/g.json", &why)) << why;
  EXPECT_TRUE(graph_file_path(base, "graphs/../graphs/g.json", &why)) << why;
  EXPECT_FALSE(graph_file_path(base, "../outside.json", &why));
  EXPECT_NE(why.find("outside"), std::string::npos) << why;
  EXPECT_FALSE(graph_file_path(base, "/etc/passwd", &why));
  EXPECT_FALSE(graph_file_path(base, "/dev/zero", &why));
  // A symlink inside that points outside is outside.
  fs::create_symlink(dir_ / "outside.json", dir_ / "plans" / "link.json");
  EXPECT_FALSE(graph_file_path(base, "link.json", &why));
  // Allowed explicitly: a root that holds both.
  setenv("SHARDPROOF_GRAPH_ROOT", dir_.c_str(), 1);
  EXPECT_TRUE(graph_file_path(base, "../outside.json", &why)) << why;
  EXPECT_TRUE(graph_file_path(base, "link.json", &why)) << why;
  EXPECT_FALSE(graph_file_path(base, "/etc/passwd", &why));
  unsetenv("SHARDPROOF_GRAPH_ROOT");
}

TEST(DaemonMemoryBudget, LargeRequestsQueueAndACancelledOneLeaves) {
  daemon::MemoryBudget budget(100);
  ASSERT_TRUE(budget.acquire(80, nullptr));
  std::atomic<bool> second{false};
  std::thread waiter([&] {
    EXPECT_TRUE(budget.acquire(50, nullptr));
    second = true;
    budget.release(50);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(second) << "80 + 50 exceed the budget of 100";
  budget.release(80);
  waiter.join();
  EXPECT_TRUE(second);
  // Larger than the whole budget: runs alone, not never.
  ASSERT_TRUE(budget.acquire(500, nullptr));
  std::atomic<bool> gone{true};
  EXPECT_FALSE(budget.acquire(10, &gone)) << "a cancelled request stops waiting";
  budget.release(500);
  EXPECT_EQ(budget.reserved(), 0u);
  // Estimates come from what a plan declares, before it is parsed.
  nlohmann::json small = nlohmann::json::parse(R"({"format": "shardproof-plan/1.1",
      "parallel": {"mesh": {"axes": [["dp", 2]], "mb": 1},
                   "programs": [{"tensors": [{}, {}], "ops": [{}]}]}})");
  nlohmann::json large = small;
  large["parallel"]["mesh"]["axes"] = nlohmann::json::parse(R"([["dp", 1024], ["tp", 512]])");
  EXPECT_LT(daemon::MemoryBudget::estimate(small.dump()),
            daemon::MemoryBudget::estimate(large.dump()));
  EXPECT_GT(daemon::MemoryBudget::estimate(large.dump()), uint64_t{1} << 30);
}

}  // namespace
}  // namespace shardproof
