// `shardproof capture H.py` and `shardproof verify H.py` with a stand-in
// front end (a `shardproof_torch` package that writes a fixed plan or fails
// as the real one does), found through SHARDPROOF_TORCH_FRONTEND: the CLI's
// side of harnesses needs no torch. With torch and the real front end, the
// examples are verified end to end (skipped, and said so, without them).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli_runner.h"
#include "tests/isolated_env.h"

namespace shardproof::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The stand-in: `capture H.py -o OUT --emit ... [--mesh M]`. It records its
// arguments and copies $FAKE_PLAN to OUT; harnesses named broken*, crash*
// and notorch* fail the way the real front end (or a missing torch) does.
const char* kFakeMain = R"PY(import os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ARGS"], "w") as f:
    f.write(" ".join(args))
harness = os.path.basename(args[1])
if harness.startswith("broken"):
    sys.stderr.write("model/h.py:7: [harness-missing] MESH is not defined\n")
    sys.exit(2)
if harness.startswith("crash"):
    raise RuntimeError("the stand-in crashed")
if harness.startswith("notorch"):
    raise ModuleNotFoundError("No module named 'torch'")
out = args[args.index("-o") + 1]
with open(os.environ["FAKE_PLAN"]) as src, open(out, "w") as dst:
    dst.write(src.read())
)PY";

json src(int line) {
  return {{"file", "model/mlp.py"}, {"line", line}, {"function", "forward"}};
}

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// y = x @ w + b, row-parallel over 2 ranks; the bug adds b before the
// all-reduce (model/mlp.py line 31).
json captured_plan(bool bug) {
  json tensors = json::object(), ops = json::array(), in = json::array(), out = json::array(),
       red_in = json::array(), red_out = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "tp" + std::to_string(r) + ".";
    tensors[p + "x"] = tensor({2, 2}, r, {{"tensor", "x"}, {"slice", {{0, 2}, {2 * r, 2 * r + 2}}}});
    tensors[p + "w"] = tensor({2, 2}, r, {{"tensor", "w"}, {"slice", {{2 * r, 2 * r + 2}, {0, 2}}}});
    tensors[p + "b"] = tensor({2}, r, {{"tensor", "b"}});
    for (const char* n : {"x", "w", "b"}) in.push_back(p + n);
    tensors[p + "h"] = tensor({2, 2}, r, {{"tensor", "h"}, {"part", {r, 2}}});
    tensors[p + "t"] = tensor({2, 2}, r);
    tensors[p + "y"] = tensor({2, 2}, r, {{"tensor", "y"}});
    out.push_back(p + "y");
    ops.push_back({{"op", "matmul"}, {"in", {p + "x", p + "w"}}, {"out", {p + "h"}},
                   {"src", src(30)}});
    if (bug) {
      ops.push_back({{"op", "add"}, {"in", {p + "h", p + "b"}}, {"out", {p + "t"}},
                     {"src", src(31)}});
      red_in.push_back(p + "t");
      red_out.push_back(p + "y");
    } else {
      red_in.push_back(p + "h");
      red_out.push_back(p + "t");
      ops.push_back({{"op", "add"}, {"in", {p + "t", p + "b"}}, {"out", {p + "y"}},
                     {"src", src(33)}});
    }
  }
  ops.push_back({{"op", "all_reduce"}, {"in", red_in}, {"out", red_out}, {"group", {0, 1}},
                 {"src", src(32)}});
  json logical = {
      {"tensors",
       {{"x", tensor({2, 4})}, {"w", tensor({4, 2})}, {"b", tensor({2})}, {"h", tensor({2, 2})},
        {"y", tensor({2, 2})}}},
      {"inputs", {"x", "w", "b"}},
      {"ops",
       {{{"op", "matmul"}, {"in", {"x", "w"}}, {"out", {"h"}}, {"src", src(20)}},
        {{"op", "add"}, {"in", {"h", "b"}}, {"out", {"y"}}, {"src", src(21)}}}},
      {"outputs", {"y"}}};
  return {{"format", "shardproof-plan/1"},
          {"name", "captured"},
          {"logical", logical},
          {"parallel",
           {{"world", 2}, {"tensors", tensors}, {"inputs", in}, {"ops", ops}, {"outputs", out}}}};
}

class HarnessCli : public ScratchDirTest {
 protected:
  HarnessCli() : ScratchDirTest("shardproof_harness_cli_") {}
  void SetUp() override {
    ScratchDirTest::SetUp();
    fs::create_directories(dir_ / "fe" / "shardproof_torch");
    file("fe/shardproof_torch/__init__.py", "");
    file("fe/shardproof_torch/__main__.py", kFakeMain);
    setenv("SHARDPROOF_TORCH_FRONTEND", (dir_ / "fe").c_str(), 1);
    setenv("FAKE_ARGS", (dir_ / "args.txt").c_str(), 1);
    // The fake front end records each run's arguments: a capture server it
    // started would record its own (the real one: test_capture_server.py).
    setenv("SHARDPROOF_CAPTURE_SERVER", "0", 1);
    use_plan(false);
    file("h.py", "MESH = {}\n");
    file("broken.py", "");
    file("crash.py", "");
    file("notorch.py", "");
  }
  void TearDown() override {
    for (const char* v : {"SHARDPROOF_TORCH_FRONTEND", "FAKE_ARGS", "FAKE_PLAN",
                          "SHARDPROOF_PYTHON", "SHARDPROOF_CAPTURE_SERVER"})
      unsetenv(v);
    ScratchDirTest::TearDown();
  }
  void use_plan(bool bug) {
    setenv("FAKE_PLAN", file(bug ? "bug.json" : "ok.json", captured_plan(bug).dump(1)).c_str(), 1);
  }
  std::string path(const char* name) const { return shell_quote((dir_ / name).string()); }
  CliResult cli(const std::string& args) { return run_cli(args, dir_ / "stderr.txt"); }
  std::string recorded_args() const { return slurp_file(dir_ / "args.txt"); }
};

TEST_F(HarnessCli, CaptureWritesThePlanWithSourcesAndScales) {
  CliResult r = cli("capture " + path("h.py") + " --mesh dp=2,tp=4 -o " + path("out.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(slurp_file(dir_ / "out.json")), captured_plan(false));
  const std::string args = recorded_args();
  EXPECT_NE(args.find("capture " + (dir_ / "h.py").string()), std::string::npos) << args;
  EXPECT_NE(args.find("--emit src,scale"), std::string::npos) << args;
  EXPECT_NE(args.find("--mesh dp=2,tp=4"), std::string::npos) << args;
  // Without -o: the plan on stdout.
  r = cli("capture " + path("h.py"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), captured_plan(false));
}

TEST_F(HarnessCli, VerifyCapturesThenVerifiesThroughTheDaemon) {
  IsolatedEnv env;
  CliResult r = cli("verify --quiet " + path("h.py"));
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find((dir_ / "h.py").string() + ": EQUIVALENT"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("in process"), std::string::npos) << r.err;  // the daemon answered
  // Again: every stage from the cache.
  r = cli("verify --quiet --format json " + path("h.py"));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(report["plan"], (dir_ / "h.py").string());
  EXPECT_EQ(report["stats"]["solved"], 0) << r.out;
}

TEST_F(HarnessCli, ABugIsFoundAtTheUsersLineInEveryFormat) {
  IsolatedEnv env;
  use_plan(true);
  CliResult r = cli("verify --quiet " + path("h.py"));
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("NOT EQUIVALENT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    at model/mlp.py:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model/mlp.py:31 (forward)"), std::string::npos) << r.out;
  // The ranks it fails on, from the captured plan (before, a harness's report
  // had none: the plan's text was not read).
  EXPECT_NE(r.out.find("where in the mesh"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("finding 1: ranks "), std::string::npos) << r.out;

  r = cli("verify --quiet --format github " + path("h.py"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("::error file=model/mlp.py,line="), std::string::npos) << r.out;

  r = cli("verify --quiet --format sarif " + path("h.py"));
  EXPECT_EQ(r.code, 1);
  json sarif = json::parse(r.out);
  EXPECT_EQ(sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
                 ["artifactLocation"]["uri"],
            "model/mlp.py")
      << r.out;

  r = cli("verify --quiet --format junit " + path("h.py"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("file=\"model/mlp.py\""), std::string::npos) << r.out;
}

TEST_F(HarnessCli, ABrokenHarnessIsExit2WithTheFrontEndsLine) {
  CliResult r = cli("capture " + path("broken.py") + " -o " + path("out.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("model/h.py:7: [harness-missing] MESH is not defined"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out.json"));

  r = cli("verify --no-daemon --quiet " + path("broken.py"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("  model/h.py:7: [harness-missing] MESH is not defined"),
            std::string::npos)
      << r.out;
  r = cli("verify --no-daemon --quiet --format json " + path("broken.py"));
  EXPECT_EQ(r.code, 2);
  json report = json::parse(r.out);
  EXPECT_EQ(report["verdict"], "invalid");
  EXPECT_EQ(report["error"]["file"], "model/h.py");
  EXPECT_EQ(report["error"]["line"], 7);
  EXPECT_EQ(report["error"]["rule"], "harness-missing");
}

TEST_F(HarnessCli, MissingTorchInterpreterOrFrontEndSayWhatToDo) {
  CliResult r = cli("capture " + path("notorch.py"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("[torch-missing]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("python3-torch"), std::string::npos) << r.err;

  setenv("SHARDPROOF_PYTHON", "/nonexistent/python3", 1);
  r = cli("verify --no-daemon --quiet " + path("h.py"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("[python]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("SHARDPROOF_PYTHON"), std::string::npos) << r.out;
  unsetenv("SHARDPROOF_PYTHON");

  setenv("SHARDPROOF_TORCH_FRONTEND", (dir_ / "nothing-here").c_str(), 1);
  r = cli("capture " + path("h.py"));
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("[front-end-missing]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("SHARDPROOF_TORCH_FRONTEND"), std::string::npos) << r.err;
}

TEST_F(HarnessCli, AFrontEndCrashIsAnInternalError) {
  CliResult r = cli("capture " + path("crash.py"));
  EXPECT_EQ(r.code, 4) << r.err;
  EXPECT_NE(r.err.find("the stand-in crashed"), std::string::npos) << r.err;
  r = cli("verify --no-daemon --quiet " + path("crash.py"));
  EXPECT_EQ(r.code, 4) << r.out << r.err;
  EXPECT_NE(r.out.find("the stand-in crashed"), std::string::npos) << r.out;
}

TEST_F(HarnessCli, PlansAndHarnessesMixInOneVerify) {
  CliResult r = cli("verify --no-daemon --quiet " + path("ok.json") + " " + path("h.py") + " " +
                    path("broken.py"));
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("3 plans: 2 equivalent, 1 invalid"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace shardproof::testing
