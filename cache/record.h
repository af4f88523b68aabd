// One stored entry of the verdict cache, as bytes: a fixed header (magic,
// the digest the entry must match, when it was stored, how long it took to
// solve, a checksum of the payload) and the payload. A record whose magic,
// length or checksum is wrong is damaged and never trusted.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardproof::cache {

using Hash128 = std::array<uint8_t, 16>;

// 32 hex digits -> 16 bytes; nullopt for anything else.
std::optional<Hash128> parse_hash128(const std::string& hex);

struct Record {
  Hash128 digest{};        // canonical digest of what the payload answers
  uint64_t stored_at = 0;  // Unix time in ms
  double solve_seconds = 0;
  std::string payload;
};

std::string encode_record(const Record& record);
std::optional<Record> decode_record(std::string_view bytes);

}  // namespace shardproof::cache
