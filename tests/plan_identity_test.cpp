// A plan's identity (cache/cached_verify.h) hashes its whole text, whatever
// its size, and keeps the values of earlier builds (hashed in pieces now).
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>
#include <string>

#include "cache/cached_verify.h"

namespace shardproof::cache {
namespace {

std::string one_shot_digest(const std::string& text) {
  XXH128_hash_t h = XXH3_128bits_withSeed(text.data(), text.size(), 0x506c616e44696700ull);
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

TEST(PlanIdentity, EveryByteCountsAndTheDigestIsTheOneShotHash) {
  std::string text;
  for (int i = 0; text.size() < (300 << 10); ++i) text += "{\"op\": " + std::to_string(i) + "},";
  PlanIdentity base = plan_identity(text);
  EXPECT_EQ(base.digest, one_shot_digest(text));
  EXPECT_EQ(plan_identity("").digest, one_shot_digest(""));
  for (size_t at : {size_t{0}, size_t{(128 << 10) - 1}, size_t{128 << 10}, text.size() - 1}) {
    std::string changed = text;
    changed[at] ^= 1;
    PlanIdentity id = plan_identity(changed);
    EXPECT_NE(id.key, base.key) << "byte " << at;
    EXPECT_NE(id.digest, base.digest) << "byte " << at;
    EXPECT_EQ(id.digest, one_shot_digest(changed));
  }
  EXPECT_EQ(plan_identity(text).key, base.key);
}

}  // namespace
}  // namespace shardproof::cache
