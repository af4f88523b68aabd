// Folds the identical pipeline stages of a compact parallel graph into one
// program (docs/planner.md, "Folded pipeline stages"). A model's middle
// stages hold the same layers under other numbers: stage k's program is
// stage k-1's with every number that differs moved by a constant per stage
// (layer 8k + 3, the next stage's pp k + 1). Such a run of programs
// "on": "pp == k" becomes one program "on": "pp >= lo && pp <= hi" whose
// numbers are affine in pp ("l{8*pp + 3}.wq"), which the class verifier
// explores at its first and last stage only (docs/soundness.md, 2.2).
//
// The fold is exact: stages k and k + 1 give one generalisation, and every
// consecutive pair of the run must give that same one, so it writes each
// stage's program back. Only numbers in names, conditions, claims and
// attributes may vary; shapes, operators, groups and send offsets must be
// equal. Stages that do not fold stay as they are.
#pragma once

#include <nlohmann/json.hpp>

namespace shardproof::planner {

// `parallel`: a compact parallel graph ({"mesh", "programs"}); the same
// graph with each run of three or more consecutive foldable stage programs
// folded into one.
nlohmann::json fold_pipeline_stages(nlohmann::json parallel);

}  // namespace shardproof::planner
