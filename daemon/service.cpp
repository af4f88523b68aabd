#include "daemon/service.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "cache/cached_verify.h"
#include "daemon/build_id.h"
#include "daemon/daemon_log.h"
#include "engine/format/plan_text.h"
#include "engine/report/report.h"
#include "engine/report/report_codec.h"

namespace shardproof::daemon {

using nlohmann::json;

namespace {

std::unique_ptr<cache::VerdictCache> open_cache(
    const DaemonConfig& config, const std::function<void(const std::string&)>& warn) {
  if (config.cache_dir.empty()) return nullptr;
  cache::CacheOptions options;
  options.dir = config.cache_dir;
  options.warn = warn;
  if (config.cache_max_bytes > 0) options.max_bytes = config.cache_max_bytes;
  Status status;
  std::unique_ptr<cache::VerdictCache> c = cache::VerdictCache::open(options, &status);
  if (!c) warn("the daemon runs without a cache: " + status.message());
  return c;
}

// A stage not solved because its request was cancelled: unknown, never stored.
StageOutcome cancelled_outcome(bool by_request) {
  StageOutcome o;
  o.status = StageStatus::Unknown;
  Finding f;
  f.kind = "unknown";
  f.message =
      by_request ? "cancelled by `shardproof daemon cancel`" : "cancelled: the client went away";
  o.findings.push_back(f);
  return o;
}

// How much memory the daemon holds now (resident set), 0 when unknown.
int64_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

}  // namespace

// One line in the daemon's log per finished verify: what, how it ended,
// how long it took and where its stages' verdicts came from.
void Service::log_finished(uint64_t request, const Report& report, double seconds, bool cancelled) {
  char time[32];
  std::snprintf(time, sizeof time, "%.2f s", seconds);
  std::string who = request ? "request " + std::to_string(request) : std::string("stored report");
  daemon_log(who + ": " + report.plan_path + ": " + verdict_name(report.verdict) +
             (cancelled ? " (cancelled)" : "") + " in " + time +
             "; stages: " + distinct_breakdown(report.stats));
}

Service::Service(const DaemonConfig& config)
    : config_(config),
      started_(std::chrono::steady_clock::now()),
      cache_(open_cache(config, [this](const std::string& m) { warn(m); })),
      cache_store_(cache_ ? std::make_unique<cache::CachedStageStore>(*cache_) : nullptr),
      inflight_(cache_store_.get()),
      plan_memos_(config.plan_memos),
      pool_(config.jobs),
      memory_(config.memory_budget_bytes > 0 ? config.memory_budget_bytes
                                             : MemoryBudget::default_bytes()) {}

Service::~Service() {
  flush();
}

void Service::flush() {
  if (cache_) cache_->flush();
}

void Service::warn(const std::string& message) {
  std::cerr << "shardproof daemon: warning: " << message << std::endl;
  std::lock_guard<std::mutex> lock(warnings_mutex_);
  if (warnings_.size() < 16) warnings_.push_back(message);
}

json Service::with_warnings(json final) {
  std::vector<std::string> pending;
  {
    std::lock_guard<std::mutex> lock(warnings_mutex_);
    pending.swap(warnings_);
  }
  if (!pending.empty()) final["warnings"] = pending;
  return final;
}

void Service::verify(const json& id, VerifyRequest request, const Reply& reply,
                     const std::atomic<bool>* cancelled) {
  try {
    VerifyOptions options;
    options.jobs = pool_.size();
    options.rlimit = request.rlimit;
    options.timeout_ms = request.timeout_ms;
    options.infer_claims = request.infer_claims;
    options.store = &inflight_;
    options.identity_memo = &identity_memo_;
    // Its row in `daemon status`, and the flag `daemon cancel` sets.
    std::unique_ptr<RequestTable::Entry> entry = requests_.add(request.path);
    RequestTable::Entry* row = entry.get();
    options.executor = [this, cancelled, row](const std::function<StageOutcome()>& prove) {
      auto gone = [cancelled] { return cancelled && cancelled->load(); };
      auto stopped = [&] { return gone() || row->cancelled(); };
      if (stopped()) return cancelled_outcome(!gone());
      ++proofs_;
      // Checked again on the pool: a queued proof may wait behind others.
      return pool_.run<StageOutcome>(
          [&] { return stopped() ? cancelled_outcome(!gone()) : prove(); });
    };
    options.progress = [&, row](const VerifyProgress& p) {
      row->set_progress(p.done, p.total);
      if (request.progress) reply(progress_message(id, p), false);
    };
    // Reserved before the plan is parsed: large plans queue, not pile up.
    const uint64_t cost = MemoryBudget::estimate(request.text);
    if (!memory_.acquire(cost, cancelled)) {  // the client went away while it waited
      reply(error_message(id, "cancelled", "the client went away"), true);
      return;
    }
    row->set_phase("verifying");
    const auto started = std::chrono::steady_clock::now();
    struct Release {
      MemoryBudget& budget;
      uint64_t bytes;
      ~Release() { budget.release(bytes); }
    } release{memory_, cost};
    // The daemon reads no user files: a plan must come with its graphs inlined.
    std::unique_ptr<PlanMemo> memo = plan_memos_.take(request.path);
    // The text is scanned before it is moved in (the plan may keep it).
    const bool refused = has_graph_references(request.text);
    Report report = cache::verify_with_cache(
        request.path, std::move(request.text), options, cache_.get(), [&] { return !refused; },
        memo.get());
    if (refused) {
      reply(error_message(id, "graph-reference",
                          "the plan references graph files; inline them (the daemon reads no "
                          "files)"),
            true);
      return;
    }
    ++verifies_;
    stages_solved_ += report.stats.solved;
    stages_cached_ += report.stats.cached;
    reply(with_warnings(result_message(id, report_to_json(report))), true);
    log_finished(row->id(), report,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                 row->cancelled() || (cancelled && cancelled->load()));
    plan_memos_.give_back(request.path, std::move(memo));  // after the answer: it may free a plan
  } catch (const std::exception& e) {
    reply(error_message(id, "internal", std::string("verification failed: ") + e.what()), true);
  }
  flush();  // after the answer: the client does not wait for the disk
}

void Service::answer_by_identity(const json& id, const VerifyRequest& request, const Reply& reply) {
  VerifyOptions options;
  if (request.progress)
    options.progress = [&](const VerifyProgress& p) { reply(progress_message(id, p), false); };
  std::optional<Report> stored =
      cache_
          ? cache::stored_plan_report(*cache_, {request.key, request.digest}, request.path, options)
          : std::nullopt;
  if (!stored) {
    reply(error_message(id, "unknown-plan", "no stored report for this plan; send its text"), true);
    return;
  }
  ++verifies_;
  stages_cached_ += stored->stats.cached;
  reply(with_warnings(result_message(id, report_to_json(*stored))), true);
  log_finished(0, *stored, 0, false);
}

bool Service::needs_flush() const {
  return cache_ && cache_->has_pending();
}

void Service::stats(const json& id, const Reply& reply) {
  json daemon = {{"verifies", verifies_.load()},
                 {"stages_proved", proofs_.load()},
                 {"stages_solved", stages_solved_.load()},
                 {"stages_cached", stages_cached_.load()},
                 {"stages_joined", inflight_.joined()}};
  json result = {{"daemon", daemon}, {"cache", nullptr}};
  if (cache_) {
    cache::CacheStats s;
    Status status = cache_->stats(&s);
    if (!status.ok()) {
      reply(error_message(id, "cache", status.message()), true);
      return;
    }
    result["cache"] = {{"path", s.path},
                       {"entries", s.entries()},
                       {"stage_entries", s.stage_entries},
                       {"plan_entries", s.plan_entries},
                       {"bytes", s.bytes},
                       {"file_bytes", s.file_bytes},
                       {"max_bytes", s.max_bytes},
                       {"hits", s.hits},
                       {"misses", s.misses},
                       {"hit_rate", s.hit_rate()}};
  }
  reply(with_warnings(result_message(id, result)), true);
}

json Service::status() const {
  double uptime =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  return {{"pid", static_cast<int64_t>(getpid())},
          {"build", build_id()},
          {"protocol", kProtocolVersion},
          {"socket", config_.paths.socket},
          {"cache", cache_ ? json(cache_->path()) : json(nullptr)},
          {"uptime_seconds", uptime},
          {"jobs", pool_.size()},
          {"busy_workers", pool_.busy()},
          {"stages_in_flight", inflight_.in_flight()},
          {"stages_joined", inflight_.joined()},
          {"stages_proved", proofs_.load()},
          {"verifies", verifies_.load()},
          {"idle_timeout_seconds", config_.idle_timeout_seconds},
          {"memory_budget_bytes", memory_.total()},
          {"memory_reserved_bytes", memory_.reserved()},
          {"rss_bytes", resident_bytes()},
          {"log", config_.paths.log},
          {"requests", requests_.to_json()}};
}

}  // namespace shardproof::daemon
