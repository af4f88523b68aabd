// The subcommands of `shardproof`. Each one registers its options on the
// CLI11 app and runs after a successful parse; the return value is the
// process exit code (see docs/cli.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/verifier.h"
#include "planner/planner.h"

namespace shardproof::cli {

// Exit codes shared by every command (verify maps verdicts onto the same set).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 2;     // bad command line or bad configuration
inline constexpr int kExitInternal = 4;  // I/O failure or unexpected error

// The most solver threads --jobs accepts (0 means one per core).
inline constexpr int kMaxJobs = 1024;

struct VerifyArgs {
  std::vector<std::string> plans;
  std::string format = "text";
  int jobs = 0;
  uint64_t rlimit = VerifyOptions{}.rlimit;  // one default, the engine's
  unsigned timeout_ms = VerifyOptions{}.timeout_ms;
  bool quiet = false;      // no progress line even on a terminal
  bool no_daemon = false;  // in process, same cache
  bool no_cache = false;   // in process, no cache
  bool classes = false;    // compact plans per coordinate class, even when small
  std::string mesh;        // harness arguments (.py): mesh sizes, e.g. "dp=2,tp=4"
  // --jobs, --rlimit, --timeout-ms, --unknown as given (cli/settings.h
  // layers them over the environment and .shardproof.json into the fields
  // above).
  std::map<std::string, std::string> setting_flags;
  bool block_unknown = true;
  std::string infer_claims = claim_inference_name(VerifyOptions{}.infer_claims);
  // --output FORMAT=FILE: the same reports, also written there.
  std::vector<std::string> outputs;
};
CLI::App* add_verify_command(CLI::App& app, VerifyArgs& args);
int run_verify(const VerifyArgs& args);

struct PlanArgs {
  std::string model;
  planner::PlanConfig config;
  std::string output;  // empty: stdout
  bool list_bugs = false;
  bool list_models = false;
};
CLI::App* add_plan_command(CLI::App& app, PlanArgs& args);
int run_plan(const PlanArgs& args);

struct CaptureArgs {
  std::string harness;       // a torch harness (.py), docs/torch-harness.md
  std::string mesh;          // e.g. "dp=2,tp=4"; empty: the harness's MESH
  std::string output = "-";  // the plan file; "-": stdout
};
CLI::App* add_capture_command(CLI::App& app, CaptureArgs& args);
int run_capture(const CaptureArgs& args);

CLI::App* add_version_command(CLI::App& app);
int run_version();

struct DaemonArgs {
  std::string action;  // start, stop, status, restart, run, cancel
  int jobs = 0;
  int idle_timeout = -1;  // seconds; -1: $SHARDPROOF_DAEMON_IDLE_TIMEOUT or the default
  std::string max_frame;  // size, e.g. "256M"; empty: the default
  std::string format = "text";
  uint64_t request = 0;  // cancel: the request's id; 0: every running request
};
CLI::App* add_daemon_command(CLI::App& app, DaemonArgs& args);
int run_daemon_command(const DaemonArgs& args);

struct CacheArgs {
  std::string action;  // stats, gc, clear
  std::string format = "text";
  std::string max_size;  // gc: size cap; empty: the configured cap
  std::string max_age;   // gc: drop entries unused for this long; empty: no age limit
};
CLI::App* add_cache_command(CLI::App& app, CacheArgs& args);
int run_cache_command(const CacheArgs& args);

struct HooksArgs {
  std::string action;                        // install, uninstall, run, affected
  std::vector<std::string> files;            // run, affected: the changed files (default: see docs)
  std::string base;                          // affected: the changes since this ref's merge base
  bool full = false;                         // run: the full verify report of each plan
  bool no_daemon = false;                    // run: verify in this process
  int jobs = 0;                              // run: solver threads of a daemon it starts
  uint64_t rlimit = VerifyOptions{}.rlimit;  // run: as verify's
  unsigned timeout_ms = VerifyOptions{}.timeout_ms;
  std::map<std::string, std::string> setting_flags;  // as VerifyArgs's
};
CLI::App* add_hooks_command(CLI::App& app, HooksArgs& args);
int run_hooks_command(const HooksArgs& args);

// `eval`: one graph of a plan in the concrete interpreter (cli/eval_command.cpp).
CLI::App* add_eval_command(CLI::App& app);
int run_eval_command();

}  // namespace shardproof::cli
