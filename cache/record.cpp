#include "cache/record.h"

#include <xxhash.h>

#include <cstring>

namespace shardproof::cache {
namespace {

constexpr char kMagic[4] = {'S', 'P', 'R', '1'};
// magic, digest, stored_at, solve_seconds, payload length, payload checksum
constexpr size_t kHeaderSize = 4 + 16 + 8 + 8 + 8 + 8;

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <class T>
T get(std::string_view bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<Hash128> parse_hash128(const std::string& hex) {
  if (hex.size() != 32) return std::nullopt;
  Hash128 out{};
  for (size_t i = 0; i < 16; ++i) {
    int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return out;
}

// Host byte order: a store is only ever read on the machine that wrote it.
std::string encode_record(const Record& record) {
  std::string out;
  out.reserve(kHeaderSize + record.payload.size());
  out.append(kMagic, sizeof kMagic);
  out.append(reinterpret_cast<const char*>(record.digest.data()), record.digest.size());
  put(out, record.stored_at);
  put(out, record.solve_seconds);
  put(out, static_cast<uint64_t>(record.payload.size()));
  put(out, static_cast<uint64_t>(XXH3_64bits(record.payload.data(), record.payload.size())));
  out += record.payload;
  return out;
}

std::optional<Record> decode_record(std::string_view bytes) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  Record r;
  std::memcpy(r.digest.data(), bytes.data() + 4, 16);
  r.stored_at = get<uint64_t>(bytes, 20);
  r.solve_seconds = get<double>(bytes, 28);
  uint64_t length = get<uint64_t>(bytes, 36);
  uint64_t checksum = get<uint64_t>(bytes, 44);
  if (length != bytes.size() - kHeaderSize) return std::nullopt;
  r.payload.assign(bytes.data() + kHeaderSize, length);
  if (XXH3_64bits(r.payload.data(), r.payload.size()) != checksum) return std::nullopt;
  return r;
}

}  // namespace shardproof::cache
