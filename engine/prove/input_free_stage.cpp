#include "engine/prove/input_free_stage.h"

#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"
#include "engine/prove/stage_testing.h"
#include "engine/stage/stage_claims.h"

namespace shardproof {
namespace {

// Any uninterpreted function leaves the exact fragment.
class NoFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>&) override {
    throw EvalError("the stage applies the uninterpreted function " + fn);
  }
};

// Past this, a value is no position or mask but a runaway power: not for
// exact evaluation.
constexpr size_t kMaxBits = 4096;

bool reads_no_input(const Stage& stage) {
  for (const StageTensor& t : stage.tensors)
    if (t.free) return false;
  return true;
}

}  // namespace

std::optional<StageOutcome> decide_input_free(const Stage& full, int64_t max_elements) {
  if (!reads_no_input(full) || full.element_count() > max_elements) return std::nullopt;
  NoFunctions none;
  ConcreteAlgebra alg(none, kMaxBits);
  const std::function<Rational(const std::string&, DClass)> leaf = [](const std::string& name,
                                                                      DClass) -> Rational {
    throw EvalError("the stage reads " + name);
  };
  bool holds = true;
  try {
    const StageValues<ConcreteAlgebra> values = evaluate_stage<ConcreteAlgebra>(alg, full, leaf);
    for (const ClaimChecks<Rational>& claim : build_claims(alg, full, values)) {
      if (!claim.missing.empty()) return std::nullopt;
      for (const ElementCheck<Rational>& check : claim.checks)
        holds = holds && check.parallel == check.logical;
    }
  } catch (const EvalError&) {
    return std::nullopt;
  }
  StageOutcome out;
  if (holds) {
    out.status = StageStatus::Proven;
    return out;
  }
  std::optional<Finding> found =
      refute_with(full, leaf, none, "the stage reads no input: evaluated exactly at full size");
  if (!found) return std::nullopt;
  out.status = StageStatus::Refuted;
  out.findings = {*found};
  return out;
}

}  // namespace shardproof
