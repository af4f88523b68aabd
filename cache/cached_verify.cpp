#include "cache/cached_verify.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "engine/core/digest.h"
#include "engine/core/z3_version.h"
#include "engine/decide/outcome_codec.h"
#include "engine/format/plan_parser.h"
#include "engine/ops/op_registry.h"
#include "engine/report/report_codec.h"
#include "engine/stage/canonical.h"

namespace shardproof::cache {
namespace {

using Clock = std::chrono::steady_clock;

constexpr XXH64_hash_t kDigestSeed = 0x506c616e44696700ull;  // "PlanDig"

// Only answers that no limit or machine could change are kept.
bool is_definite(const Report& r) {
  if (r.verdict == Verdict::Equivalent) return true;
  if (r.verdict != Verdict::NotEquivalent) return false;
  for (const Finding& f : r.findings)
    if (f.kind == "unknown") return false;
  return true;
}

void keep_report(VerdictCache& cache, const PlanIdentity& id, const Report& report) {
  nlohmann::json j = report_to_json(report);
  j["plan"] = "";  // the path belongs to the request, not to the text
  cache.put(EntryKind::Plan, id.key, id.digest,
            j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), report.stats.seconds);
}

}  // namespace

PlanIdentity plan_identity(const std::string& text) {
  std::string versions = "shardproof-plan|engine=" + std::to_string(kEngineVersion) +
                         "|semantics=" + std::to_string(OpRegistry::kSemanticsVersion) +
                         "|codec=" + std::to_string(kOutcomeCodecVersion) + "|z3=" + z3_version() +
                         "|";
  // Streamed: a large plan's text is not copied to be hashed. Both hashes
  // take each piece while it is in the CPU's cache: the text is read from
  // memory once, not twice (the same values as hashing it whole).
  XXH3_state_t* key = XXH3_createState();
  XXH3_state_t* digest = XXH3_createState();
  XXH3_128bits_reset(key);
  XXH3_128bits_reset_withSeed(digest, kDigestSeed);
  XXH3_128bits_update(key, versions.data(), versions.size());
  constexpr size_t kPiece = 128 << 10;
  for (size_t at = 0; at < text.size(); at += kPiece) {
    size_t n = std::min(kPiece, text.size() - at);
    XXH3_128bits_update(key, text.data() + at, n);
    XXH3_128bits_update(digest, text.data() + at, n);
  }
  PlanIdentity id{hex128(XXH3_128bits_digest(key)), hex128(XXH3_128bits_digest(digest))};
  XXH3_freeState(key);
  XXH3_freeState(digest);
  return id;
}

std::optional<Report> stored_plan_report(VerdictCache& cache, const PlanIdentity& id,
                                         const std::string& path, const VerifyOptions& options) {
  auto start = Clock::now();
  std::optional<std::string> payload = cache.get(EntryKind::Plan, id.key, id.digest);
  if (!payload) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(*payload, nullptr, false);
  std::optional<Report> hit = j.is_discarded() ? std::nullopt : report_from_json(j);
  if (!hit) return std::nullopt;
  hit->plan_path = path;
  count_all_cached(hit->stats);
  hit->stats.phases = {};  // this answer read no plan and cut no stage
  hit->stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (options.progress) {
    VerifyProgress p;
    p.done = p.total = hit->stats.stages;
    p.cached = hit->stats.cached;
    p.stage = "the whole plan";
    p.status = hit->verdict == Verdict::Equivalent ? "proven" : "refuted";
    p.source = "cache";
    options.progress(p);
  }
  return hit;
}

Report verify_with_cache(const std::string& path, std::string text, const VerifyOptions& options,
                         VerdictCache* cache, const AdmitPlan& admit, PlanMemo* memo) {
  PlanIdentity id;
  if (cache) {
    id = plan_identity(text);
    if (std::optional<Report> hit = stored_plan_report(*cache, id, path, options)) return *hit;
  }
  if (admit && !admit()) {
    Report refused;
    refused.plan_path = path;
    refused.verdict = Verdict::InternalError;
    refused.error = "the plan was not admitted for verification";
    return refused;
  }
  Report report = memo ? verify_text_with_memo(path, std::move(text), options, *memo)
                       : verify_plan_text(path, text, "", options);
  if (cache && is_definite(report)) keep_report(*cache, id, report);
  return report;
}

}  // namespace shardproof::cache
