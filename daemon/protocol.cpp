#include "daemon/protocol.h"

namespace shardproof::daemon {

using nlohmann::json;

std::string to_frame(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

json hello_message(const std::string& build_id) {
  return {{"type", "hello"}, {"protocol", kProtocolVersion}, {"build", build_id}};
}

json error_message(const json& id, const std::string& code, const std::string& message) {
  return {{"type", "error"}, {"id", id}, {"code", code}, {"message", message}};
}

json result_message(const json& id, json result) {
  return {{"type", "result"}, {"id", id}, {"result", std::move(result)}};
}

json progress_message(const json& id, const VerifyProgress& p) {
  return {{"type", "progress"}, {"id", id},           {"stage", p.stage},
          {"status", p.status}, {"source", p.source}, {"done", p.done},
          {"total", p.total},   {"cached", p.cached}, {"solving", p.solving}};
}

json verify_request_message(const json& id, const VerifyRequest& r) {
  json plan = {{"path", r.path}};
  if (r.text_bytes)
    plan["text_bytes"] = *r.text_bytes;
  else if (r.key.empty())
    plan["text"] = r.text;
  else
    plan.update({{"key", r.key}, {"digest", r.digest}});
  return {{"type", "verify"},
          {"id", id},
          {"plan", std::move(plan)},
          {"options",
           {{"rlimit", r.rlimit},
            {"timeout_ms", r.timeout_ms},
            {"progress", r.progress},
            {"infer_claims", claim_inference_name(r.infer_claims)}}}};
}

namespace {

const json* verify_plan(const json& m) {
  if (!m.is_object() || !m.contains("plan")) return nullptr;
  const json& plan = m["plan"];
  return plan.is_object() ? &plan : nullptr;
}

const char* const kBadLength = "plan.text_bytes must be a non-negative integer";

}  // namespace

bool payload_length(const json& m, uint64_t* length, std::string* why) {
  *length = 0;
  if (!m.is_object() || m.value("type", json()) != "verify") return true;
  const json* plan = verify_plan(m);
  if (!plan || !plan->contains("text_bytes")) return true;
  const json& n = (*plan)["text_bytes"];
  if (!n.is_number_unsigned()) {
    *why = kBadLength;
    return false;
  }
  *length = n.get<uint64_t>();
  return true;
}

std::optional<VerifyRequest> parse_verify_request(const json& m, std::string* why) {
  VerifyRequest r;
  const json* plan = verify_plan(m);
  auto is_string = [&](const char* key) { return plan->contains(key) && (*plan)[key].is_string(); };
  if (plan && plan->contains("text_bytes")) {
    const json& length = (*plan)["text_bytes"];
    if (!length.is_number_unsigned()) {
      *why = kBadLength;
      return std::nullopt;
    }
    if (plan->contains("text") || plan->contains("key") || plan->contains("digest")) {
      *why = "plan.text_bytes comes without \"text\", \"key\" and \"digest\": one text per request";
      return std::nullopt;
    }
    r.text_bytes = length.get<uint64_t>();
  } else if (plan && is_string("text")) {
    r.text = (*plan)["text"].get<std::string>();
  } else if (plan && is_string("key") && is_string("digest")) {
    r.key = (*plan)["key"].get<std::string>();
    r.digest = (*plan)["digest"].get<std::string>();
  } else {
    *why =
        "verify needs \"plan\": {\"path\": string, \"text\": string} (or \"text_bytes\" "
        "and the text as a payload, or \"key\" and \"digest\" instead of \"text\")";
    return std::nullopt;
  }
  if (plan->contains("path")) {
    if (!(*plan)["path"].is_string()) {
      *why = "plan.path must be a string";
      return std::nullopt;
    }
    r.path = (*plan)["path"].get<std::string>();
  }
  if (!m.contains("options")) return r;
  const json& o = m["options"];
  if (!o.is_object()) {
    *why = "options must be an object";
    return std::nullopt;
  }
  if (o.contains("rlimit")) {
    if (!o["rlimit"].is_number_unsigned()) {
      *why = "options.rlimit must be a non-negative integer";
      return std::nullopt;
    }
    r.rlimit = o["rlimit"].get<uint64_t>();
  }
  if (o.contains("timeout_ms")) {
    if (!o["timeout_ms"].is_number_unsigned() || o["timeout_ms"].get<uint64_t>() > UINT32_MAX) {
      *why = "options.timeout_ms must be a non-negative integer";
      return std::nullopt;
    }
    r.timeout_ms = o["timeout_ms"].get<unsigned>();
  }
  if (o.contains("progress")) {
    if (!o["progress"].is_boolean()) {
      *why = "options.progress must be a boolean";
      return std::nullopt;
    }
    r.progress = o["progress"].get<bool>();
  }
  if (o.contains("infer_claims")) {
    const std::optional<ClaimInference> mode =
        o["infer_claims"].is_string() ? parse_claim_inference(o["infer_claims"].get<std::string>())
                                      : std::nullopt;
    if (!mode) {
      *why = "options.infer_claims must be \"auto\", \"on\" or \"off\"";
      return std::nullopt;
    }
    r.infer_claims = *mode;
  }
  return r;
}

}  // namespace shardproof::daemon
