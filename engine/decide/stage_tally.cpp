#include "engine/decide/stage_tally.h"

namespace shardproof {

Decided decided_by(const StageOutcome& o) {
  if (o.queries > 0) return Decided::Solved;
  switch (o.status) {
    case StageStatus::Proven:
      // Proven without a query and not by normalisation: the proof of its
      // leader, a stage with the same verdict key (plan_run.cpp).
      return o.trivial ? Decided::Trivial : Decided::Symmetric;
    case StageStatus::Refuted:
      return Decided::RefutedByTesting;
    case StageStatus::Unknown:
    case StageStatus::InternalError:
      break;
  }
  return Decided::Untried;
}

void count_decided(Stats& s, Decided d) {
  switch (d) {
    case Decided::Trivial:
      ++s.proven_trivially;
      return;
    case Decided::Solved:
      ++s.solved;
      return;
    case Decided::RefutedByTesting:
      ++s.refuted_by_testing;
      return;
    case Decided::Symmetric:
      ++s.symmetric;
      return;
    case Decided::Untried:
      ++s.untried;
      return;
    case Decided::Cached:
      ++s.cached;
      return;
    case Decided::SharedProof:
      ++s.shared_proofs;
      return;
    case Decided::Unchanged:
      ++s.reused;
      return;
  }
}

}  // namespace shardproof
