// The daemon's wire protocol (docs/protocol.md): one JSON object per line
// over a Unix socket, a verify's plan text optionally as a raw payload after
// its line. A `hello` exchange first (protocol version and build id must
// match), then requests that each carry an `id`; the daemon answers each
// with zero or more `progress` events and exactly one `result` or `error`
// for that id.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/verifier.h"

namespace shardproof::daemon {

// 2: a verify may send its plan text as a raw payload (plan.text_bytes).
constexpr int kProtocolVersion = 2;
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
  // The text follows the frame as a raw payload of this many bytes (the
  // frame then has no "text"; the daemon fills `text` from the payload).
  std::optional<uint64_t> text_bytes;
  std::string key, digest;  // instead of text: answered only from the cache
  uint64_t rlimit = VerifyOptions{}.rlimit;
  unsigned timeout_ms = VerifyOptions{}.timeout_ms;
  bool progress = true;  // stream progress events
  ClaimInference infer_claims = VerifyOptions{}.infer_claims;
};

// With request.text_bytes the frame announces the payload and the caller
// sends that many bytes of text right after it.
nlohmann::json verify_request_message(const nlohmann::json& id, const VerifyRequest& request);
// nullopt with `why` when a field is missing or of the wrong type. With
// text_bytes set the text is still to be read from the payload.
std::optional<VerifyRequest> parse_verify_request(const nlohmann::json& message, std::string* why);

// How many payload bytes follow this frame on the stream: a verify's
// plan.text_bytes, 0 for any other frame. False with `why` when text_bytes
// is there but not a non-negative integer: where the frame ends is unknown.
bool payload_length(const nlohmann::json& message, uint64_t* length, std::string* why);

}  // namespace shardproof::daemon
