#include "engine/core/digest.h"

#include <cstdio>

namespace shardproof {

std::string hex128(XXH128_hash_t h) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

std::string xxh3_128_hex(std::string_view bytes, uint64_t seed) {
  return hex128(XXH3_128bits_withSeed(bytes.data(), bytes.size(), seed));
}

}  // namespace shardproof
