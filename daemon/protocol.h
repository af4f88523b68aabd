// The daemon's wire protocol (docs/protocol.md): one JSON object per line
// over a Unix socket. A `hello` exchange first (protocol version and build
// id must match), then requests that each carry an `id`; the daemon answers
// each with zero or more `progress` events and exactly one `result` or
// `error` for that id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/verifier.h"

namespace shardproof::daemon {

constexpr int kProtocolVersion = 1;
constexpr uint64_t kDefaultFrameLimit = uint64_t{256} << 20;

// One frame: compact JSON and "\n". Invalid UTF-8 inside strings is replaced.
std::string to_frame(const nlohmann::json& message);

nlohmann::json hello_message(const std::string& build_id);
nlohmann::json error_message(const nlohmann::json& id, const std::string& code,
                             const std::string& message);
nlohmann::json result_message(const nlohmann::json& id, nlohmann::json result);
nlohmann::json progress_message(const nlohmann::json& id, const VerifyProgress& progress);

// What a verify request carries: the plan as text (graph files inlined),
// or only the identity of that text (cached_verify.h) to ask for a stored
// report without sending it; the name to report it under; the per-request
// solver limits.
struct VerifyRequest {
  std::string path;
  std::string text;
  std::string key, digest;  // instead of text: answered only from the cache
  uint64_t rlimit = VerifyOptions{}.rlimit;
  unsigned timeout_ms = VerifyOptions{}.timeout_ms;
  bool progress = true;  // stream progress events
};

nlohmann::json verify_request_message(const nlohmann::json& id, const VerifyRequest& request);
// nullopt with `why` when a field is missing or of the wrong type.
std::optional<VerifyRequest> parse_verify_request(const nlohmann::json& message, std::string* why);

}  // namespace shardproof::daemon
