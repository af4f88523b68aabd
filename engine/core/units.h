// Sizes and durations as people write them on a command line or in an
// environment variable: "512M", "2G", "30d", "12h".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardproof {

// "123", "64K", "512M", "2G", "1T" (binary multiples; a trailing "B" or
// "iB" is accepted). nullopt when malformed or out of range.
std::optional<uint64_t> parse_size(const std::string& text);

// "90" or "90s", "15m", "12h", "30d", "2w". nullopt when malformed.
std::optional<int64_t> parse_duration_seconds(const std::string& text);

// "1.5 MiB", "320 B".
std::string format_bytes(uint64_t bytes);

}  // namespace shardproof
