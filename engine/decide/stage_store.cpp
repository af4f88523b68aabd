#include "engine/decide/stage_store.h"

#include <xxhash.h>

#include <cstdio>
#include <utility>

#include "engine/stage/canonical.h"

namespace shardproof {

namespace {

// Any fixed seed other than the key's (0) makes the digest independent of it.
constexpr XXH64_hash_t kDigestSeed = 0x5368617264446967ull;  // "ShardDig"

std::string hex128(XXH128_hash_t h) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

}  // namespace

StageIdentity stage_identity(const Stage& stage) {
  std::string bytes = canonical_bytes(stage);
  return {stage_key(stage), hex128(XXH3_128bits_withSeed(bytes.data(), bytes.size(), kDigestSeed)),
          verdict_key(stage)};
}

std::optional<std::string> MemoryVerdictStore::lookup(const StageIdentity& id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = outcomes_.find(id.key);
  if (it == outcomes_.end()) return std::nullopt;
  ++hits_;
  return it->second;
}

int64_t MemoryVerdictStore::take_hits() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(hits_, 0);
}

void MemoryVerdictStore::finish(const StageIdentity& id, const std::optional<std::string>& outcome,
                                double) {
  if (!outcome) return;
  std::lock_guard<std::mutex> lock(mutex_);
  outcomes_.emplace(id.key, *outcome);
}

}  // namespace shardproof
