#include "cache/record.h"

#include <sodium.h>

#include <cstring>

namespace shardproof::cache {
namespace {

constexpr char kMagic[4] = {'S', 'P', 'R', '2'};
constexpr size_t kMacSize = 32;
// magic, digest, stored_at, solve_seconds, payload length, MAC
constexpr size_t kMacOffset = 4 + 16 + 8 + 8 + 8;
constexpr size_t kHeaderSize = kMacOffset + kMacSize;

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

// Keyed BLAKE2b over the entry key's length and bytes, the header before
// the MAC, and the payload (its length is in the header).
std::array<uint8_t, kMacSize> mac(const MacKey& key, std::string_view entry_key,
                                  std::string_view header, std::string_view payload) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, key.data(), key.size(), kMacSize);
  uint64_t key_length = entry_key.size();
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(&key_length),
                            sizeof key_length);
  for (std::string_view part : {entry_key, header, payload})
    crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(part.data()), part.size());
  std::array<uint8_t, kMacSize> out;
  crypto_generichash_final(&state, out.data(), out.size());
  return out;
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

// Host byte order: a store is only ever read on the machine that wrote it
// (one written elsewhere fails its MACs anyway).
std::string encode_record(const Record& record, const MacKey& key, std::string_view entry_key) {
  std::string out;
  out.reserve(kHeaderSize + record.payload.size());
  out.append(kMagic, sizeof kMagic);
  out.append(reinterpret_cast<const char*>(record.digest.data()), record.digest.size());
  put(out, record.stored_at);
  put(out, record.solve_seconds);
  put(out, static_cast<uint64_t>(record.payload.size()));
  std::array<uint8_t, kMacSize> m = mac(key, entry_key, out, record.payload);
  out.append(reinterpret_cast<const char*>(m.data()), m.size());
  out += record.payload;
  return out;
}

std::optional<Record> decode_record(std::string_view bytes, const MacKey& key,
                                    std::string_view entry_key) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  uint64_t length = get<uint64_t>(bytes, 36);
  if (length != bytes.size() - kHeaderSize) return std::nullopt;
  std::string_view payload = bytes.substr(kHeaderSize);
  std::array<uint8_t, kMacSize> expected =
      mac(key, entry_key, bytes.substr(0, kMacOffset), payload);
  if (sodium_memcmp(expected.data(), bytes.data() + kMacOffset, kMacSize) != 0) return std::nullopt;
  Record r;
  std::memcpy(r.digest.data(), bytes.data() + 4, 16);
  r.stored_at = get<uint64_t>(bytes, 20);
  r.solve_seconds = get<double>(bytes, 28);
  r.payload.assign(payload);
  return r;
}

}  // namespace shardproof::cache
