// Proves one stage: encodes it in Z3 (stage_eval.h on Z3Algebra), asks one
// query per claim, and on a counterexample replays it in exact arithmetic
// before it becomes a finding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/report/report.h"
#include "engine/stage/stage.h"

namespace shardproof {

struct ReducedValues;  // lifted_values.h

enum class StageStatus { Proven, Refuted, Unknown, InternalError };

struct StageOutcome {
  StageStatus status = StageStatus::Unknown;
  std::vector<Finding> findings;  // refuted claims, or why it is unknown
  std::string error;              // InternalError only
  int64_t queries = 0;            // solver calls made
  bool trivial = false;           // closed by normalisation alone
  double seconds = 0;
  // The values a reduced-size refutation was found with, by finding (null
  // or absent: none kept), for a lifted replay at full size
  // (lifted_values.h). Never stored: a cached outcome has none.
  std::vector<std::shared_ptr<const ReducedValues>> values;
};

struct ProverOptions {
  uint64_t rlimit = 20'000'000;
  int64_t max_stage_elements = 200'000;
  unsigned timeout_ms = 60'000;  // wall-clock backstop per query (0: none)
  int test_trials = 3;           // random concrete trials before the solver (0: none)
  // A stage too large for the solver is still tested on random values up
  // to this size: a concrete mismatch refutes it whatever its size.
  int64_t max_test_elements = 4'000'000;
};

// `stage` is already reduced (or deliberately kept at full size).
StageOutcome prove_stage(const Stage& stage, const ProverOptions& options);

}  // namespace shardproof
