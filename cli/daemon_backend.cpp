#include "cli/daemon_backend.h"

#include <iostream>

#include "cache/cache_location.h"
#include "cache/cached_verify.h"
#include "daemon/launcher.h"
#include "daemon/pid_lock.h"
#include "daemon/protocol.h"
#include "daemon/state_dir.h"
#include "engine/report/report_codec.h"

namespace shardproof::cli {

using nlohmann::json;

namespace {

VerifyProgress progress_from(const json& m) {
  // The strings must outlive the call: map them onto the engine's literals.
  static const char* const kStatuses[] = {"proven", "refuted", "unknown", "error", "exploring"};
  static const char* const kSources[] = {"solved", "cache", "duplicate", "reused"};
  auto literal = [](const std::string& s, const auto& options) -> const char* {
    for (const char* o : options)
      if (s == o) return o;
    return "";
  };
  VerifyProgress p;
  p.done = m.value("done", int64_t{0});
  p.total = m.value("total", int64_t{0});
  p.cached = m.value("cached", int64_t{0});
  p.solving = m.value("solving", int64_t{0});
  p.stage = m.value("stage", std::string());
  p.status = literal(m.value("status", std::string()), kStatuses);
  p.source = literal(m.value("source", std::string()), kSources);
  return p;
}

}  // namespace

std::optional<Report> DaemonBackend::verify(const std::string& path, const std::string& text,
                                            const VerifyOptions& options) {
  daemon::VerifyRequest request;
  request.path = path;
  request.rlimit = options.rlimit;
  request.timeout_ms = options.timeout_ms;
  request.infer_claims = options.infer_claims;
  request.progress = static_cast<bool>(options.progress);
  auto call = [&](json* answer, std::string_view payload = {}) {
    return client_->call(
        daemon::verify_request_message(nullptr, request),
        [&](const json& m) {
          if (options.progress) options.progress(progress_from(m));
        },
        answer, payload);
  };
  // First by identity: an unchanged plan's report comes back without its
  // text crossing the socket.
  cache::PlanIdentity identity = cache::plan_identity(text);
  request.key = identity.key;
  request.digest = identity.digest;
  json answer;
  Status status = call(&answer);
  if (status.ok() && answer.value("code", std::string()) == "unknown-plan") {
    // The text as a raw payload after the request: neither escaped here
    // nor parsed as JSON there.
    request.key.clear();
    request.digest.clear();
    request.text_bytes = text.size();
    status = call(&answer, text);
  }
  if (!status.ok()) {
    last_error_ = status.message();
    return std::nullopt;
  }
  // Warnings of the daemon's cache (a store moved aside) are the user's too.
  if (answer.contains("warnings") && answer["warnings"].is_array())
    for (const json& w : answer["warnings"])
      if (w.is_string()) std::cerr << "shardproof: warning: " << w.get<std::string>() << "\n";
  if (answer.value("type", std::string()) != "result") {
    last_error_ = "the daemon answered " + answer.value("code", std::string("an error")) + ": " +
                  answer.value("message", std::string());
    return std::nullopt;
  }
  std::optional<Report> report = report_from_json(answer.value("result", json()));
  if (!report) last_error_ = "the daemon's report is malformed";
  return report;
}

std::unique_ptr<DaemonBackend> connect_daemon(const std::vector<std::string>& run_args,
                                              Status* status) {
  daemon::DaemonPaths paths;
  if (Status s = daemon::daemon_paths(cache::default_cache_dir(), &paths); !s.ok()) {
    *status = s;
    return nullptr;
  }
  Status why;
  if (auto client = daemon::DaemonClient::connect(paths.socket, &why))
    return std::make_unique<DaemonBackend>(std::move(client));
  // One holds the lock but does not answer (stopped, hung, every connection
  // taken): starting another would only wait for it.
  if (pid_t holder = daemon::lock_holder(paths.lock); holder > 0) {
    *status = Status::error("the daemon (pid " + std::to_string(holder) +
                            ") does not answer: " + why.message());
    return nullptr;
  }
  if (Status s = daemon::start_daemon(paths, run_args); !s.ok()) {
    *status = s;
    return nullptr;
  }
  auto client = daemon::DaemonClient::connect(paths.socket, status);
  return client ? std::make_unique<DaemonBackend>(std::move(client)) : nullptr;
}

}  // namespace shardproof::cli
