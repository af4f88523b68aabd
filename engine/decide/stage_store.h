// Hooks through which verify_plan reuses stage verdicts kept elsewhere (the
// LMDB cache in cache/, a daemon's in-flight solves in daemon/) and runs its
// proofs where the caller wants them, without the engine knowing either.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "engine/prove/stage_prover.h"
#include "engine/stage/stage_identity.h"

namespace shardproof {

// A store of definite stage verdicts in position-based form (outcome_codec.h).
// Called from several solver threads at once.
class StageVerdictStore {
 public:
  virtual ~StageVerdictStore() = default;
  // The stored outcome of a stage with this identity, or nullopt. After a
  // nullopt the caller solves the stage and calls finish() exactly once for
  // it, so a store may let other callers of the same key wait for that
  // answer instead of solving it a second time.
  virtual std::optional<std::string> lookup(const StageIdentity& id) = 0;
  // `outcome` is the encoded definite outcome, or nullopt when there is
  // nothing to keep (unknown, internal error, not encodable).
  virtual void finish(const StageIdentity& id, const std::optional<std::string>& outcome,
                      double solve_seconds) = 0;
  // Whether the outcome lookup() just gave for `id` was decided earlier in
  // this same verification: the report counts it by how it was decided
  // (stage_tally.h), not as cached.
  virtual bool decided_in_this_run(const StageIdentity& /*id*/) { return false; }
  // That stage `id`'s outcome in this verification is a proof shared from
  // another stage (proof_identity.h): a later round that takes it from here
  // counts it as shared, as the round that took it did.
  virtual void mark_shared_proof(const StageIdentity& /*id*/) {}
  virtual bool shared_proof_in_this_run(const StageIdentity& /*id*/) { return false; }
};

// A store in memory in front of the caller's (if any), for one verification
// that decides overlapping sets of stages more than once (the class
// verifier's refinement rounds and batches, claim inference's rounds).
class MemoryVerdictStore : public StageVerdictStore {
 public:
  explicit MemoryVerdictStore(StageVerdictStore* backing = nullptr) : backing_(backing) {}
  std::optional<std::string> lookup(const StageIdentity& id) override;
  void finish(const StageIdentity& id, const std::optional<std::string>& outcome,
              double solve_seconds) override;
  // The stages it holds are the ones decided in this verification.
  bool decided_in_this_run(const StageIdentity& id) override;
  void mark_shared_proof(const StageIdentity& id) override;
  bool shared_proof_in_this_run(const StageIdentity& id) override;

 private:
  StageVerdictStore* backing_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::string> outcomes_;  // by stage key
  std::unordered_set<std::string> shared_;                 // stage keys, mark_shared_proof
};

// Runs one stage's proof and returns its outcome; the daemon runs it on its
// worker pool. Empty: the verifier proves on its own thread.
using SolveExecutor = std::function<StageOutcome(const std::function<StageOutcome()>& prove)>;

}  // namespace shardproof
