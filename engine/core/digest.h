// 128-bit digests as the 32 hex digits that keys, digests and plan
// identities are written in (one spelling everywhere a key is compared).
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace shardproof {

// High half first, each half as 16 lower-case hex digits.
std::string hex128(XXH128_hash_t h);

// XXH3-128 of `bytes` under `seed`, as hex128.
std::string xxh3_128_hex(std::string_view bytes, uint64_t seed = 0);

}  // namespace shardproof
