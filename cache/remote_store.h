// The remote tier of the verdict cache: stage outcomes and plan reports a
// whole team shares in one Redis (SHARDPROOF_REMOTE_CACHE), behind each
// machine's LMDB store (verdict_cache.h asks it on a local miss and copies a
// hit locally, and writes definite answers back). Records carry a MAC with
// the team key (team_key.h): one that fails it is counted, ignored and
// re-proved, never believed. The remote only ever makes things faster: it
// is given a short deadline, and a remote that is unreachable or stalls is
// said once and left alone for a while (the rest of a CLI run).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cache/record.h"
#include "cache/redis_client.h"

namespace shardproof::cache {

enum class RemoteMode { ReadWrite, ReadOnly };

struct RemoteSettings {
  std::string url;       // empty: no remote tier
  std::string key_file;  // the team key; empty: the remote is not used
  RemoteMode mode = RemoteMode::ReadWrite;
  std::chrono::milliseconds timeout{250};  // to connect, and for each command
  std::chrono::seconds retry_after{300};   // a remote that failed is left alone this long
};

// SHARDPROOF_REMOTE_CACHE, SHARDPROOF_REMOTE_CACHE_MODE (read-write or
// read-only), SHARDPROOF_REMOTE_CACHE_TIMEOUT_MS and the team key
// SHARDPROOF_CACHE_KEY_FILE. A malformed mode or timeout sets `problem`
// and falls back to the safe choice (read-only, 250 ms).
RemoteSettings remote_settings_from_env(std::string* problem);

// What the remote tier did, counted per process and added up in the local
// store (VerdictCache::flush), so `shardproof cache stats` shows them.
struct RemoteCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t rejected = 0;  // records that failed authentication: ignored, re-proved
  uint64_t errors = 0;    // no answer in time, connection lost, write refused
  uint64_t writes = 0;
  uint64_t requests = 0;    // GETs and SETs that got an answer
  uint64_t latency_us = 0;  // their total round-trip time
};

// The key of an entry in Redis: a prefix with the store's schema, then the
// local entry key (kind and hash) in hex.
std::string remote_key(std::string_view entry_key);

class RemoteStore {
 public:
  using Warn = std::function<void(const std::string&)>;

  // Null when settings.url is empty, or (saying why through `warn`) when
  // the URL is malformed or there is no usable team key. Connects lazily.
  static std::unique_ptr<RemoteStore> open(const RemoteSettings& settings, const Warn& warn);

  // The record stored under `entry_key` when its MAC holds under the team
  // key and it answers `digest`.
  std::optional<Record> get(std::string_view entry_key, const Hash128& digest);
  // Writes a record (read-write mode only); failures are counted and warned
  // about once.
  void put(std::string_view entry_key, const Record& record);
  // The counters since the last call.
  RemoteCounters take_counters();
  // For `cache stats`: whether the server answers, its round trip and how
  // many keys it holds.
  bool probe(long long* keys, double* milliseconds, std::string* why);

  const std::string& url() const { return settings_.url; }
  bool writable() const { return settings_.mode == RemoteMode::ReadWrite; }

 private:
  RemoteStore(const RemoteSettings& settings, const RedisAddress& address, const MacKey& key,
              Warn warn);
  // The connected client, or null while the remote is down. Lock held.
  RedisClient* client();
  // Drops the connection and leaves the remote alone for retry_after. Lock held.
  void mark_down(const std::string& why);

  RemoteSettings settings_;
  RedisAddress address_;
  MacKey key_;
  Warn warn_;
  std::mutex mutex_;
  std::unique_ptr<RedisClient> client_;
  std::chrono::steady_clock::time_point down_until_{};
  bool writes_off_ = false;
  bool warned_rejected_ = false;
  RemoteCounters counters_;
};

}  // namespace shardproof::cache
