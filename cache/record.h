// One stored entry of the verdict cache, as bytes: a fixed header (magic,
// the digest the entry must match, when it was stored, how long it took to
// solve, the payload's length, a MAC) and the payload. The MAC is keyed
// with the user's secret (cache_key.h) and covers the entry's key in the
// store, the header and the payload: a record rewritten by anyone without
// the key (a refuted stage turned proven), moved to another key, damaged,
// or written under another key is never trusted.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cache/cache_key.h"

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

// `entry_key`: the key the record is stored under.
std::string encode_record(const Record& record, const MacKey& key, std::string_view entry_key);
std::optional<Record> decode_record(std::string_view bytes, const MacKey& key,
                                    std::string_view entry_key);

}  // namespace shardproof::cache
