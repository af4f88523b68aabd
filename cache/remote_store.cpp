#include "cache/remote_store.h"

#include <sodium.h>

#include <cstdlib>

#include "cache/team_key.h"

namespace shardproof::cache {
namespace {

using Clock = std::chrono::steady_clock;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

uint64_t micros_since(Clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
}

}  // namespace

RemoteSettings remote_settings_from_env(std::string* problem) {
  RemoteSettings s;
  s.url = env("SHARDPROOF_REMOTE_CACHE");
  s.key_file = team_key_file_from_env();
  std::string mode = env("SHARDPROOF_REMOTE_CACHE_MODE");
  if (mode == "read-only") {
    s.mode = RemoteMode::ReadOnly;
  } else if (!mode.empty() && mode != "read-write") {
    s.mode = RemoteMode::ReadOnly;
    *problem = "SHARDPROOF_REMOTE_CACHE_MODE is \"" + mode +
               "\", expected read-write or read-only: using read-only";
  }
  std::string timeout = env("SHARDPROOF_REMOTE_CACHE_TIMEOUT_MS");
  if (!timeout.empty()) {
    char* end = nullptr;
    long ms = std::strtol(timeout.c_str(), &end, 10);
    if (*end == '\0' && ms >= 1 && ms <= 60'000)
      s.timeout = std::chrono::milliseconds(ms);
    else
      *problem = "SHARDPROOF_REMOTE_CACHE_TIMEOUT_MS is \"" + timeout +
                 "\", expected milliseconds from 1 to 60000: using 250";
  }
  return s;
}

std::string remote_key(std::string_view entry_key) {
  std::string hex(2 * entry_key.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(entry_key.data()),
                 entry_key.size());
  hex.pop_back();
  return "shardproof-cache/2:" + hex;
}

std::unique_ptr<RemoteStore> RemoteStore::open(const RemoteSettings& settings, const Warn& warn) {
  if (settings.url.empty()) return nullptr;
  std::string why;
  std::optional<RedisAddress> address = parse_redis_url(settings.url, &why);
  if (!address) {
    warn("SHARDPROOF_REMOTE_CACHE: " + why + "; the remote cache is not used");
    return nullptr;
  }
  if (settings.key_file.empty()) {
    warn("the remote cache " + settings.url +
         " is not used: its records need the team key, and SHARDPROOF_CACHE_KEY_FILE is not set");
    return nullptr;
  }
  Status status;
  std::optional<MacKey> key = load_team_key(settings.key_file, &status);
  if (!key) {
    warn("the remote cache " + settings.url + " is not used: " + status.message());
    return nullptr;
  }
  return std::unique_ptr<RemoteStore>(new RemoteStore(settings, *address, *key, warn));
}

RemoteStore::RemoteStore(const RemoteSettings& settings, const RedisAddress& address,
                         const MacKey& key, Warn warn)
    : settings_(settings), address_(address), key_(key), warn_(std::move(warn)) {}

RedisClient* RemoteStore::client() {
  if (client_) return client_.get();
  if (Clock::now() < down_until_) return nullptr;
  std::string why;
  client_ = RedisClient::connect(address_, settings_.timeout, &why);
  if (!client_) mark_down(why);
  return client_.get();
}

void RemoteStore::mark_down(const std::string& why) {
  client_.reset();
  ++counters_.errors;
  down_until_ = Clock::now() + settings_.retry_after;
  warn_("the remote cache " + settings_.url + " did not answer (" + why +
        "); going on with the local cache alone");
}

std::optional<Record> RemoteStore::get(std::string_view entry_key, const Hash128& digest) {
  std::lock_guard<std::mutex> lock(mutex_);
  RedisClient* c = client();
  if (!c) return std::nullopt;
  std::string value, why;
  auto start = Clock::now();
  RedisClient::Result result = c->get(remote_key(entry_key), &value, &why);
  if (result == RedisClient::Result::Failed) {
    mark_down(why);
    return std::nullopt;
  }
  ++counters_.requests;
  counters_.latency_us += micros_since(start);
  if (result == RedisClient::Result::Refused) {
    ++counters_.errors;
    return std::nullopt;
  }
  if (result == RedisClient::Result::Missing) {
    ++counters_.misses;
    return std::nullopt;
  }
  std::optional<Record> record = decode_record(value, key_, entry_key);
  if (!record || record->digest != digest) {
    // Written without the team key, altered, or moved to another key.
    ++counters_.rejected;
    if (!warned_rejected_) {
      warned_rejected_ = true;
      warn_("the remote cache " + settings_.url +
            " holds records that fail authentication with the team key (written with another "
            "key, or altered); they are ignored and re-proved");
    }
    return std::nullopt;
  }
  ++counters_.hits;
  return record;
}

void RemoteStore::put(std::string_view entry_key, const Record& record) {
  if (!writable()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (writes_off_) return;
  RedisClient* c = client();
  if (!c) return;
  std::string why;
  auto start = Clock::now();
  RedisClient::Result result =
      c->set(remote_key(entry_key), encode_record(record, key_, entry_key), &why);
  if (result == RedisClient::Result::Failed) {
    mark_down(why);
    return;
  }
  ++counters_.requests;
  counters_.latency_us += micros_since(start);
  if (result == RedisClient::Result::Refused) {
    // Full (maxmemory with noeviction), or a read-only replica: reads still help.
    ++counters_.errors;
    writes_off_ = true;
    warn_("the remote cache " + settings_.url + " refused a write (" + why +
          "); nothing more is written to it in this run");
    return;
  }
  ++counters_.writes;
}

RemoteCounters RemoteStore::take_counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  RemoteCounters out = counters_;
  counters_ = RemoteCounters{};
  return out;
}

bool RemoteStore::probe(long long* keys, double* milliseconds, std::string* why) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto start = Clock::now();
  std::unique_ptr<RedisClient> c = RedisClient::connect(address_, settings_.timeout, why);
  if (!c) return false;
  RedisClient::Result result = c->probe(keys, why);
  *milliseconds = static_cast<double>(micros_since(start)) / 1000.0;
  return result == RedisClient::Result::Ok;
}

}  // namespace shardproof::cache
