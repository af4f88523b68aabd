#include "engine/decide/stage_run.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "engine/core/parallel_for.h"
#include "engine/decide/finding_sources.h"
#include "engine/decide/outcome_codec.h"
#include "engine/decide/stage_tally.h"
#include "engine/prove/full_size_check.h"
#include "engine/prove/stage_prover.h"
#include "engine/stage/canonical.h"
#include "engine/stage/proof_identity.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"
#include "engine/stage/stage_identity.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

// Where a stage's outcome came from in this run. Earlier: from the store,
// which had it from earlier in this same verification (decided_in_this_run).
// SharedProof: the store held a proof of the same reduced query, made for
// another stage (under its proof key, proof_identity.h), backed at this
// full size.
enum class Source { Solved, Stored, Earlier, Duplicate, Reused, SharedProof };

const char* source_name(Source s) {
  switch (s) {
    case Source::Solved:
    case Source::Earlier:
      return "solved";
    case Source::Stored:
    case Source::SharedProof:
      return "cache";
    case Source::Duplicate:
      return "duplicate";
    case Source::Reused:
      return "reused";
  }
  return "solved";
}

const char* status_name(StageStatus s) {
  switch (s) {
    case StageStatus::Proven:
      return "proven";
    case StageStatus::Refuted:
      return "refuted";
    case StageStatus::Unknown:
      return "unknown";
    case StageStatus::InternalError:
      return "error";
  }
  return "error";
}

// How the first stage of a key was decided: its category in the counts.
Decided decided_as(Source source, const StageOutcome& o) {
  switch (source) {
    case Source::Stored:
      return Decided::Cached;
    case Source::SharedProof:
      return Decided::SharedProof;
    case Source::Reused:
      return Decided::Unchanged;
    case Source::Solved:
    case Source::Earlier:
    case Source::Duplicate:
      break;
  }
  return decided_by(o);
}

// The report's findings: one mismatch per stage key and logical tensor. A
// stage's duplicates (the same claim at other ranks, micro-batches or
// slices: a group bug) and its other failing claims are folded into the first finding, which lists
// their tensors (Finding::also_failing), so the mesh grid marks every place and CI shows one
// annotation, not N.
void add_findings(const std::vector<StageIdentity>& ids, const std::vector<StageOutcome>& outcomes,
                  Report& report) {
  std::map<std::string, size_t> first_mismatch;  // key and tensor -> index in report.findings
  for (size_t i = 0; i < outcomes.size(); ++i) {
    // The stage key, not the verdict key: a follower's elements are its own.
    const std::string& key = ids[i].key;
    for (const Finding& f : outcomes[i].findings) {
      if (f.kind != "mismatch" || key.empty()) {
        report.findings.push_back(f);
        continue;
      }
      auto [at, first] = first_mismatch.emplace(key + '\n' + f.tensor, report.findings.size());
      if (first) {
        report.findings.push_back(f);
        continue;
      }
      add_also_failing(report.findings[at->second], f.parallel_tensors);
      add_also_failing(report.findings[at->second], f.also_failing);
    }
  }
}

// Folds stage outcomes into the plan's verdict: any refuted claim makes it
// not equivalent; otherwise any undecided stage makes it unknown.
void combine(const std::vector<StageIdentity>& ids, const std::vector<StageOutcome>& outcomes,
             Report& report) {
  bool refuted = false, unknown = false;
  for (const StageOutcome& o : outcomes) {
    switch (o.status) {
      case StageStatus::Proven:
        break;
      case StageStatus::Refuted:
        refuted = true;
        break;
      case StageStatus::Unknown:
        unknown = true;
        break;
      case StageStatus::InternalError:
        if (report.error.empty()) report.error = o.error;
        break;
    }
  }
  add_findings(ids, outcomes, report);
  if (!report.error.empty())
    report.verdict = Verdict::InternalError;
  else if (refuted)
    report.verdict = Verdict::NotEquivalent;
  else if (unknown)
    report.verdict = Verdict::Unknown;
  else
    report.verdict = Verdict::Equivalent;
  // Mismatches first: they are what the user must act on.
  std::stable_partition(report.findings.begin(), report.findings.end(),
                        [](const Finding& f) { return f.kind == "mismatch"; });
}

// Decides the stages of one plan: each distinct stage once (from the store
// or the solver), then its duplicates from it. Stages an earlier run of the
// plan decided (reuse) keep their identity and outcome; their Stage is left
// empty and never read.
class StageRun {
 public:
  StageRun(const Plan& plan, const std::vector<StageUnit>& units, const VerifyOptions& options,
           std::vector<std::optional<ReusedStage>> reuse = {})
      : plan_(plan),
        units_(units),
        stages_(units.size()),
        built_(units.size(), 0),
        options_(options),
        prover_{options.rlimit, options.max_stage_elements, options.timeout_ms,
                options.test_trials},
        ids_(units.size()),
        outcomes_(units.size()),
        sources_(units.size()),
        shared_(units.size()),
        reduction_done_(units.size(), 0),
        reused_(units.size(), 0),
        proved_reduced_(units.size(), 0),
        leader_(units.size(), kNoLeader) {
    for (size_t i = 0; i < reuse.size(); ++i) {
      if (!reuse[i]) continue;
      ids_[i] = std::move(reuse[i]->id);
      outcomes_[i] = std::move(reuse[i]->outcome);
      sources_[i] = Source::Reused;
      reused_[i] = 1;
    }
  }

  // What the record of this run keeps, once it has run.
  std::vector<StageIdentity>& identities() { return ids_; }
  std::vector<StageOutcome>& outcomes() { return outcomes_; }
  // How each distinct stage (by key) was decided.
  std::map<std::string, Decided>& decided() { return decided_; }

  void run(Report& report) {
    auto start = Clock::now();
    announce_reused();
    key_stages();
    // One stage per distinct key (identical layers once).
    std::map<std::string, size_t> first_with_key;
    std::vector<size_t> unique, duplicates;
    for (size_t i = 0; i < stages_.size(); ++i) {
      const bool first = first_with_key.emplace(ids_[i].key, i).second;
      if (reused_[i]) continue;  // decided; still the first of its key
      (first ? unique : duplicates).push_back(i);
      if (!first) release(i);
    }
    report.stats.unique_stages = static_cast<int64_t>(first_with_key.size());
    auto keyed = Clock::now();
    report.stats.phases.key = std::chrono::duration<double>(keyed - start).count();
    // Distinct stages that reduce to one stage (the same layer at other
    // mesh coordinates: only full positions differ) share a verdict key and
    // so a verdict: one of them, the leader, is decided first; the others
    // take its proof (through the store like any decision, so a later run
    // finds them there).
    std::map<std::string, size_t> leader_of;
    std::vector<size_t> leaders, followers;
    for (size_t i : unique) {
      auto [it, first] = leader_of.emplace(ids_[i].verdict, i);
      if (first || ids_[i].verdict.empty()) {
        leaders.push_back(i);
      } else {
        followers.push_back(i);
        leader_[i] = it->second;
      }
    }
    parallel_for(options_.jobs, leaders.size(), [&](size_t u) { decide_safely(leaders[u]); });
    parallel_for(options_.jobs, followers.size(), [&](size_t f) { decide_safely(followers[f]); });
    decide_duplicates(duplicates, first_with_key);
    report.stats.phases.decide = std::chrono::duration<double>(Clock::now() - keyed).count();
    combine(ids_, outcomes_, report);
    // Each distinct stage counted once, by its first stage.
    for (const auto& [key, i] : first_with_key) {
      const Decided d = decided_as(sources_[i], outcomes_[i]);
      count_decided(report.stats, d);
      decided_.emplace(key, d);
    }
  }

 private:
  // Keys every stage: from the memo when its unreduced form was seen
  // before (it is reduced later, only if it must be solved or its findings
  // rendered), else by reducing it.
  void key_stages() {
    StageIdentityMemo run_memo;
    StageIdentityMemo& memo = options_.identity_memo ? *options_.identity_memo : run_memo;
    // A stage keyed from the memo is let go at once (most stages of a large
    // plan are: holding them all was most of its peak memory); one reduced
    // here is kept, as it is likely the first of its key.
    parallel_for(options_.jobs, stages_.size(), [&](size_t i) {
      if (reused_[i]) return;
      if (!options_.reduce_shapes) {
        ids_[i] = stage_identity(stage(i));
        release(i);
        return;
      }
      const RawStageKey raw = raw_stage_key(stage(i));
      if (std::optional<StageIdentity> known = memo.find(raw)) {
        ids_[i] = std::move(*known);
        release(i);
        return;
      }
      ensure_reduced(i);
      ids_[i] = stage_identity(stage(i));
      memo.remember(raw, ids_[i]);
    });
  }

  // A duplicate of a proven stage is proven; a duplicate of a refuted one
  // gets its findings by position, in its own names; any other duplicate
  // is solved on its own.
  void decide_duplicates(const std::vector<size_t>& duplicates,
                         const std::map<std::string, size_t>& first_with_key) {
    std::vector<size_t> resolve;
    for (size_t i : duplicates) {
      const size_t first = first_with_key.at(ids_[i].key);
      std::optional<StageOutcome> copy;
      if (outcomes_[first].status == StageStatus::Proven) {
        copy = StageOutcome{};
        copy->status = StageStatus::Proven;
      } else if (shared_[first]) {
        ensure_reduced(i);
        copy = decode_outcome(stage(i), *shared_[first]);
        release(i);
      }
      if (!copy) {
        resolve.push_back(i);
        continue;
      }
      outcomes_[i] = std::move(*copy);
      sources_[i] = Source::Duplicate;
      announce(i);
    }
    parallel_for(options_.jobs, resolve.size(), [&](size_t r) { decide_safely(resolve[r]); });
  }

  // An exception must not escape a solver thread (that would end the
  // process, a daemon included): it becomes the stage's internal error.
  void decide_safely(size_t i) {
    try {
      decide(i);
    } catch (const std::exception& e) {
      StageOutcome o;
      o.status = StageStatus::InternalError;
      o.error = "stage " + std::to_string(i + 1) + ": " + e.what();
      record(i, std::move(o), Source::Solved);
    }
    release(i);
  }

  // A stage is built when first needed and let go when decided: a plan's
  // stages are never all in memory at once. Building is deterministic, so a
  // stage let go and built again (and reduced again) is the same stage.
  Stage& stage(size_t i) {
    if (!built_[i]) {
      stages_[i] = build_stage(plan_, units_[i], static_cast<int>(i) + 1);
      built_[i] = 1;
    }
    return stages_[i];
  }
  void release(size_t i) {
    stages_[i] = Stage{};
    built_[i] = 0;
    reduction_done_[i] = 0;
  }

  // Takes the stage's outcome from the store, or solves it (and keeps it).
  void decide(size_t i) {
    StageVerdictStore* store = options_.store;
    if (store == nullptr) {
      StageOutcome o = solve(i);
      // Duplicates of a refuted stage take its findings by position.
      if (o.status == StageStatus::Refuted) shared_[i] = encode_outcome(stage(i), o);
      record(i, std::move(o), Source::Solved);
      return;
    }
    if (std::optional<std::string> stored = store->lookup(ids_[i])) {
      // A proven stage needs no reduced form; findings are rendered through it.
      std::optional<StageOutcome> o =
          decode_outcome([&]() -> const Stage& { return stage(i); }, *stored);
      if (o && !o->findings.empty() && !reduction_done_[i]) {
        ensure_reduced(i);
        o = decode_outcome(stage(i), *stored);
      }
      if (o) {
        const Source source = !store->decided_in_this_run(ids_[i])       ? Source::Stored
                              : store->shared_proof_in_this_run(ids_[i]) ? Source::SharedProof
                                                                         : Source::Earlier;
        shared_[i] = std::move(stored);
        record(i, std::move(*o), source);
        return;
      }
      // Undecodable (an engine bug): solve, but leave the store alone.
      record(i, solve(i), Source::Solved);
      return;
    }
    // After a miss the store is owed exactly one finish(), even on a throw.
    std::optional<std::string> encoded;
    double seconds = 0;
    struct Finish {
      StageVerdictStore* store;
      const StageIdentity& id;
      std::optional<std::string>& encoded;
      double& seconds;
      ~Finish() { store->finish(id, encoded, seconds); }
    } finish{store, ids_[i], encoded, seconds};
    // The same for the proof key, when it was asked for and missed: a proof
    // only when the solver proved this reduced query (not the full stage
    // after a reduced-only counterexample, not a leader's proof taken, not
    // one the backstop doubted).
    ProofLookup proof;
    struct FinishProof {
      StageVerdictStore* store;
      ProofLookup& proof;
      double& seconds;
      ~FinishProof() {
        if (proof.owed) store->finish(proof.id, proof.proven, seconds);
      }
    } finish_proof{store, proof, seconds};
    Source source = Source::Solved;
    StageOutcome o;
    if (std::optional<StageOutcome> proven = shared_proof(i, *store, proof)) {
      o = std::move(*proven);
      // A proof this run made counts as a leader's does (symmetric, by
      // decided_by); one an earlier verification made, as a shared proof.
      source = kept_here(proof.id.key) ? Source::Solved : Source::SharedProof;
      if (source == Source::SharedProof) store->mark_shared_proof(ids_[i]);
    } else {
      o = solve(i);
      if (proof.owed && proved_reduced_[i] && o.status == StageStatus::Proven) {
        proof.proven = encode_outcome(stage(i), proven_outcome());
        std::lock_guard<std::mutex> lock(proofs_mutex_);
        proofs_kept_.insert(proof.id.key);
      }
    }
    encoded = encode_outcome(stage(i), o);
    seconds = o.seconds;
    shared_[i] = encoded;
    record(i, std::move(o), source);
  }

  // A stage's proof key as looked up: after a miss the store is owed one
  // finish() for it, with the proof or nothing.
  struct ProofLookup {
    StageIdentity id;
    bool owed = false;
    std::optional<std::string> proven;
  };

  bool kept_here(const std::string& proof_key) {
    std::lock_guard<std::mutex> lock(proofs_mutex_);
    return proofs_kept_.count(proof_key) > 0;
  }

  static StageOutcome proven_outcome() {
    StageOutcome o;
    o.status = StageStatus::Proven;
    return o;
  }

  // A stage whose verdict the store does not hold, proven through the proof
  // of the same reduced query that another stage's solve left under its
  // proof key (another mesh: full sizes that no op reads differ). Only a
  // proof is ever kept there and only a proof is taken. The proof is the
  // reduced query's; the full-size backstop is this stage's own, so it runs
  // again here. Not for a follower of a proven leader: it takes the leader's.
  std::optional<StageOutcome> shared_proof(size_t i, StageVerdictStore& store, ProofLookup& proof) {
    if (leader_[i] != kNoLeader && outcomes_[leader_[i]].status == StageStatus::Proven)
      return std::nullopt;
    ensure_reduced(i);
    proof.id = proof_identity(stage(i));
    std::optional<std::string> stored = store.lookup(proof.id);
    if (!stored) {
      proof.owed = true;
      return std::nullopt;
    }
    std::optional<StageOutcome> o = decode_outcome(stage(i), *stored);
    if (!o || o->status != StageStatus::Proven || !o->findings.empty()) return std::nullopt;
    return checked_at_full_size(i, proven_outcome());
  }

  // Stages keyed from the memo are still as cut; solving and rendering
  // findings need them reduced (the same reduction the memo's key came from).
  void ensure_reduced(size_t i) {
    if (!options_.reduce_shapes || reduction_done_[i]) return;
    reduce_stage(stage(i));
    reduction_done_[i] = 1;
  }

  StageOutcome solve(size_t i) {
    if (std::optional<StageOutcome> copy = leaders_outcome(i)) return std::move(*copy);
    ensure_reduced(i);
    struct Solving {
      std::atomic<int64_t>& count;
      explicit Solving(std::atomic<int64_t>& c) : count(c) { ++count; }
      ~Solving() { --count; }
    } solving(solving_);
    auto prove = [&] {
      StageOutcome reduced = prove_stage(stage(i), prover_);
      proved_reduced_[i] = reduced.status == StageStatus::Proven;
      return checked_at_full_size(i, std::move(reduced));
    };
    return options_.executor ? options_.executor(prove) : prove();
  }

  // A reduced stage's verdict against the stage at full size
  // (full_size_check.h): a proof is backed, a refutation needs a witness,
  // a stage too large to prove (reduced or not) is tested at full size.
  StageOutcome checked_at_full_size(size_t i, StageOutcome o) {
    if (!options_.reduce_shapes) return o;
    if (!stage(i).reduced && o.status != StageStatus::Unknown) return o;
    const Stage full = build_stage(plan_, units_[i], static_cast<int>(i) + 1);
    return check_at_full_size(full, stage(i), std::move(o), prover_);
  }

  // A follower's outcome from its leader (same verdict key) when the leader
  // is proven. A refuted follower is solved on its own: findings name
  // full-size elements, and a follower's full positions are its own.
  std::optional<StageOutcome> leaders_outcome(size_t i) {
    if (leader_[i] == kNoLeader || outcomes_[leader_[i]].status != StageStatus::Proven)
      return std::nullopt;
    StageOutcome o;
    o.status = StageStatus::Proven;
    return o;
  }

  void record(size_t i, StageOutcome o, Source source) {
    outcomes_[i] = std::move(o);
    sources_[i] = source;
    announce(i);
  }

  // One event for all the stages carried over from an earlier run.
  void announce_reused() {
    const int64_t n = std::count(reused_.begin(), reused_.end(), 1);
    if (n == 0) return;
    std::lock_guard<std::mutex> lock(progress_mutex_);
    done_ += n;
    if (!options_.progress) return;
    VerifyProgress p;
    p.done = done_;
    p.total = static_cast<int64_t>(stages_.size());
    p.stage = std::to_string(n) + " stages unchanged since the last verification";
    p.status = "proven";
    for (size_t i = 0; i < reused_.size(); ++i)
      if (reused_[i] && outcomes_[i].status != StageStatus::Proven) p.status = "refuted";
    p.source = source_name(Source::Reused);
    options_.progress(p);
  }

  void announce(size_t i) {
    std::lock_guard<std::mutex> lock(progress_mutex_);
    ++done_;
    if (sources_[i] == Source::Stored) ++cached_;
    if (!options_.progress) return;
    VerifyProgress p;
    p.done = done_;
    p.total = static_cast<int64_t>(stages_.size());
    p.cached = cached_;
    p.solving = solving_;
    p.stage = "stage " + std::to_string(i + 1) + ": " + stage_title(plan_, units_[i]);
    p.status = status_name(outcomes_[i].status);
    p.source = source_name(sources_[i]);
    options_.progress(p);
  }

  const Plan& plan_;
  const std::vector<StageUnit>& units_;
  std::vector<Stage> stages_;  // built on demand (stage(i)), else empty
  std::vector<char> built_;    // one byte per stage: written by one thread each
  const VerifyOptions& options_;
  ProverOptions prover_;
  std::vector<StageIdentity> ids_;
  std::vector<StageOutcome> outcomes_;
  std::vector<Source> sources_;
  // Encoded outcome of a distinct stage, for its duplicates.
  std::vector<std::optional<std::string>> shared_;
  // Whether reduce_stage ran on a stage (a failed reduction leaves it full
  // size and is not retried). One byte per stage: written by one thread each.
  std::vector<char> reduction_done_;
  std::vector<char> reused_;  // 1: decided by an earlier run
  // 1: the solver proved the stage as reduced (what a proof key names).
  // One byte per stage: written by one thread each.
  std::vector<char> proved_reduced_;
  std::mutex proofs_mutex_;
  std::set<std::string> proofs_kept_;  // proof keys this run proved and stored
  static constexpr size_t kNoLeader = static_cast<size_t>(-1);
  std::vector<size_t> leader_;  // a follower's leader (same verdict key), or kNoLeader
  std::map<std::string, Decided> decided_;
  std::atomic<int64_t> solving_{0};
  std::mutex progress_mutex_;
  int64_t done_ = 0, cached_ = 0;
};

}  // namespace

DecidedStages decide_stages(const Plan& plan, const std::vector<StageUnit>& units,
                            const VerifyOptions& options,
                            std::vector<std::optional<ReusedStage>> reuse, Report& report) {
  StageRun run(plan, units, options, std::move(reuse));
  run.run(report);
  return {std::move(run.identities()), std::move(run.outcomes()), std::move(run.decided())};
}

}  // namespace shardproof
