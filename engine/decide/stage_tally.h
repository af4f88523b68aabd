// How each distinct stage of a verification was decided, for the report's
// counts (Stats): every distinct stage is in exactly one category, so the
// counts add up to Stats::unique_stages (docs/cli.md, "the verdict line").
#pragma once

#include "engine/prove/stage_prover.h"
#include "engine/report/report.h"

namespace shardproof {

enum class Decided {
  Trivial,           // proven by normalisation alone
  Solved,            // sent to the solver (proven, refuted, or given up on)
  RefutedByTesting,  // refuted by random concrete values before any solver call
  Symmetric,         // took the proof of a stage that reduces to the same stage
  Untried,           // left undecided without a solver call (too large, no semantics, error)
  Cached,            // taken from the store, decided by an earlier verification
  SharedProof,       // proven by a proof an earlier verification stored for the same query
  Unchanged,         // carried over from the plan's last verification (an edit)
};

// A stage decided in this verification (now, or earlier in it and kept in
// memory): by what its outcome records.
Decided decided_by(const StageOutcome& outcome);

// Adds one distinct stage decided as `d` to the counts.
void count_decided(Stats& stats, Decided d);

}  // namespace shardproof
