// The engine's entry point: a plan in, a Report out. The CLI, the daemon and
// the tests all call these the same way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "engine/ir.h"
#include "engine/report.h"

namespace shardproof {

struct VerifyOptions {
  int jobs = 0;                          // solver threads; 0 = all cores
  uint64_t rlimit = 20'000'000;          // Z3 resource limit per claim query (deterministic)
  bool reduce_shapes = true;             // shape reduction (off only for debugging)
  int64_t max_stage_elements = 200'000;  // larger reduced stages are reported unknown
  // Wall-clock backstop per query in ms (0: none): Z3 4.8 does not count
  // every nonlinear search step against rlimit. Hitting it gives unknown.
  unsigned timeout_ms = 60'000;
  int test_trials = 3;  // random concrete trials per stage before the solver
  // Called after each stage is decided: (done, total). May be empty.
  std::function<void(int64_t, int64_t)> progress;
};

// Reads, validates and verifies a plan file. Never throws: I/O problems are
// InternalError (exit 4), contract violations Invalid (exit 2).
Report verify_plan_file(const std::string& path, const VerifyOptions& options);

// Verifies an already validated plan.
Report verify_plan(const Plan& plan, const VerifyOptions& options);

}  // namespace shardproof
