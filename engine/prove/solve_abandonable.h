// A stage's solver part on a thread other than the caller's, so that a
// check Z3 does not stop even when interrupted (an overrun, bounded_check.h)
// is left behind instead of holding the verdict: the caller gets nullopt at
// once (the stage is *unknown*), and the thread runs on alone with its own
// copy of the stage until Z3 returns, then ends. Otherwise the thread is
// kept for the caller's next stage, and with it its Z3 context
// (thread_context.h).
#pragma once

#include <functional>
#include <optional>

#include "engine/prove/stage_prover.h"
#include "engine/stage/stage.h"

namespace shardproof {

using StageSolve = std::function<StageOutcome(const Stage&, const ProverOptions&)>;

// How long past its deadline a check may run before its solve is abandoned.
unsigned abandon_after_ms(const ProverOptions& options);

// `solve(stage, options)`, or nullopt when one of its checks overran. Without
// a timeout (options.timeout_ms == 0) nothing is bounded: `solve` runs here.
std::optional<StageOutcome> solve_abandonable(const Stage& stage, const ProverOptions& options,
                                              StageSolve solve);

}  // namespace shardproof
