// What the daemon does for a request, apart from the socket: verify plans
// with the cache, the worker pool and in-flight deduplication; report
// status and cache statistics. Methods that can take long run on request
// threads, never on libuv's loop.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cached_stage_store.h"
#include "cache/verdict_cache.h"
#include "daemon/config.h"
#include "daemon/inflight_store.h"
#include "daemon/memory_budget.h"
#include "daemon/plan_memos.h"
#include "daemon/protocol.h"
#include "daemon/request_table.h"
#include "daemon/worker_pool.h"
#include "engine/report/report.h"
#include "engine/stage/stage_memo.h"

namespace shardproof::daemon {

// Sends one message to the requesting client; `final` marks the last one.
using Reply = std::function<void(const nlohmann::json& message, bool final)>;

class Service {
 public:
  // Opens the cache (a daemon without one still serves, more slowly).
  explicit Service(const DaemonConfig& config);
  ~Service();

  // Progress events, then one result (or error), through `reply`. Once
  // `cancelled` is set (the client went away), stages not yet solved are
  // not solved: the answer is unknown and goes to nobody. `request` comes
  // with its text: a request by key goes to answer_by_identity (the server
  // dispatches it there before any thread hop).
  void verify(const nlohmann::json& id, VerifyRequest request, const Reply& reply,
              const std::atomic<bool>* cancelled = nullptr);
  // A verify by identity (no text): answered from the cache's stored
  // reports or with `unknown-plan`. Quick and never blocks on a writer, so
  // the loop thread runs it itself; what it marks as used is written by a
  // later flush().
  void answer_by_identity(const nlohmann::json& id, const VerifyRequest& request,
                          const Reply& reply);
  // Uses and counts wait in memory for a flush().
  bool needs_flush() const;
  // The cache's statistics and the daemon's own counters.
  void stats(const nlohmann::json& id, const Reply& reply);
  // Fields of the `status` result that the service knows, running requests
  // included.
  nlohmann::json status() const;
  // Cancels running verify `request` (0: all of them): its stages not yet
  // solved are not solved, its answer is unknown. How many were cancelled.
  int cancel(uint64_t request) { return requests_.cancel(request); }
  void flush();

 private:
  // Warnings of the cache (a store moved aside or emptied) are logged and
  // go to the next client answered, in its final message's "warnings".
  void warn(const std::string& message);
  nlohmann::json with_warnings(nlohmann::json final);
  void log_finished(uint64_t request, const Report& report, double seconds, bool cancelled);

  DaemonConfig config_;
  std::mutex warnings_mutex_;
  std::vector<std::string> warnings_;
  std::chrono::steady_clock::time_point started_;
  std::unique_ptr<cache::VerdictCache> cache_;
  std::unique_ptr<cache::CachedStageStore> cache_store_;
  InflightStore inflight_;
  // Stage identities by unreduced content, across requests: a plan sent
  // again with one layer changed reduces only that layer's stages.
  StageIdentityMemo identity_memo_;
  // The last verification of recent plan paths: an edit is re-read and
  // re-decided only where it changed.
  PlanMemos plan_memos_;
  WorkerPool pool_;
  MemoryBudget memory_;
  RequestTable requests_;
  std::atomic<int64_t> verifies_{0}, stages_solved_{0}, stages_cached_{0};
  std::atomic<int64_t> proofs_{0};  // stage proofs run on the pool, trivial ones included
};

}  // namespace shardproof::daemon
