#include "engine/stage/stage_identity.h"

#include "engine/stage/proof_identity.h"

#include "engine/core/digest.h"
#include "engine/stage/canonical.h"

namespace shardproof {
namespace {

// Any fixed seed other than the key's (0) makes the digest independent of it.
constexpr XXH64_hash_t kDigestSeed = 0x5368617264446967ull;  // "ShardDig"

}  // namespace

StageIdentity stage_identity(const Stage& stage) {
  std::string bytes = canonical_bytes(stage);
  return {stage_key(stage), xxh3_128_hex(bytes, kDigestSeed), verdict_key(stage)};
}

StageIdentity proof_identity(const Stage& stage) {
  return {proof_key(stage), xxh3_128_hex(proof_bytes(stage), kDigestSeed), std::string()};
}

}  // namespace shardproof
