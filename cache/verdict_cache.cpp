#include "cache/verdict_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <vector>

#include "cache/private_path.h"
#include "cache/record.h"
#include "cache/store_probe.h"

namespace shardproof::cache {
namespace {

namespace fs = std::filesystem;

constexpr size_t kKeySize = 17;  // kind byte + 16-byte hash

uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

MDB_val val(const void* data, size_t size) {
  return MDB_val{size, const_cast<void*>(data)};
}
MDB_val val(const std::string& s) {
  return val(s.data(), s.size());
}

// What an entry costs: its key twice (entry and use time), record, use time.
uint64_t entry_size(size_t record_size) {
  return 2 * kKeySize + record_size + sizeof(uint64_t);
}

std::optional<std::string> make_key(EntryKind kind, const std::string& hex) {
  std::optional<Hash128> hash = parse_hash128(hex);
  if (!hash) return std::nullopt;
  std::string key(1, static_cast<char>(kind));
  key.append(reinterpret_cast<const char*>(hash->data()), hash->size());
  return key;
}

uint64_t read_u64(MDB_txn* txn, MDB_dbi dbi, const std::string& key) {
  MDB_val k = val(key), v;
  uint64_t value = 0;
  if (mdb_get(txn, dbi, &k, &v) == 0 && v.mv_size == sizeof value)
    std::memcpy(&value, v.mv_data, sizeof value);
  return value;
}

int write_u64(MDB_txn* txn, MDB_dbi dbi, const std::string& key, uint64_t value) {
  MDB_val k = val(key), v = val(&value, sizeof value);
  return mdb_put(txn, dbi, &k, &v, 0);
}

// Serialises opening (and moving aside) between processes: two processes
// finding the same broken store must not both rebuild it.
class OpenLock {
 public:
  explicit OpenLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~OpenLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }

 private:
  int fd_;
};

void default_warn(const std::string& message) {
  std::cerr << "shardproof: warning: " << message << "\n";
}

// The counters kept in the meta table, by name, with values to add.
std::vector<std::pair<const char*, uint64_t>> counter_values(uint64_t hits, uint64_t misses,
                                                             uint64_t errors, uint64_t lookup_us,
                                                             const RemoteCounters& r) {
  return {{"hits", hits},
          {"misses", misses},
          {"errors", errors},
          {"lookup_us", lookup_us},
          {"remote_hits", r.hits},
          {"remote_misses", r.misses},
          {"remote_rejected", r.rejected},
          {"remote_errors", r.errors},
          {"remote_writes", r.writes},
          {"remote_requests", r.requests},
          {"remote_latency_us", r.latency_us}};
}

// How long the probe of a store may take before the store is given up.
constexpr int kProbeTimeoutMs = 30'000;
// How many times a store that looks damaged is checked before it is moved aside.
constexpr int kStoreLooks = 3;

struct OpenAttempt {
  LmdbEnv::Opened result = LmdbEnv::Opened::Failed;
  std::string why;
  std::string foreign;  // set: the store was written under another key (emptied)
  std::unique_ptr<LmdbEnv> env;
  MDB_dbi entries = 0, used = 0, meta = 0;
};

// The store remembers which key wrote it. Records of another key would all
// fail authentication: the store is emptied (they are re-proved) and said so.
int adopt_key(LmdbEnv& env, OpenAttempt& a, const std::string& key_id) {
  return env.write([&](MDB_txn* txn) {
    const std::string id_key = "key_id";
    MDB_val k = val(id_key), v;
    int rc = mdb_get(txn, a.meta, &k, &v);
    if (rc != 0 && rc != MDB_NOTFOUND) return rc;
    std::string found = rc == 0 ? std::string(static_cast<const char*>(v.mv_data), v.mv_size) : "";
    if (found == key_id) return 0;
    MDB_stat st;
    if ((rc = mdb_stat(txn, a.entries, &st)) != 0) return rc;
    if (st.ms_entries != 0) {
      a.foreign = std::to_string(st.ms_entries) + " records";
      if ((rc = mdb_drop(txn, a.entries, 0)) != 0 || (rc = mdb_drop(txn, a.used, 0)) != 0)
        return rc;
      for (const char* counter : {"bytes", "hits", "misses"})
        if ((rc = write_u64(txn, a.meta, counter, 0)) != 0) return rc;
    }
    MDB_val id = val(key_id);
    return mdb_put(txn, a.meta, &k, &id, 0);
  });
}

// Opens the environment and its tables and checks the schema.
OpenAttempt try_open(const CacheOptions& options, const std::string& path,
                     const std::string& key_id) {
  OpenAttempt a;
  // Another process committing to the store right now (the daemon and an
  // in-process CLI share it) can make it look truncated for an instant; damage
  // stays. So a store is broken only if it fails three looks 100 ms apart (a
  // probe that ran out of time is not tried again).
  for (int look = 1;; ++look) {
    a.why.clear();
    if (store_file_fits(path, &a.why) && probe_store(path, kProbeTimeoutMs, &a.why)) break;
    if (look == kStoreLooks || a.why.rfind("reading it did not finish", 0) == 0) {
      a.result = LmdbEnv::Opened::Broken;
      return a;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // LMDB needs room beyond the entries' own bytes (B-tree pages, pages that
  // readers still see): twice the cap and some.
  uint64_t limit =
      options.max_map_bytes > 0 ? options.max_map_bytes : 2 * options.max_bytes + (64u << 20);
  limit = std::max(limit, options.initial_map_bytes);
  a.result = LmdbEnv::open(path, options.initial_map_bytes, limit, &a.env, &a.why);
  if (a.result != LmdbEnv::Opened::Ok) return a;
  std::string found_schema;
  int rc = a.env->write([&](MDB_txn* txn) {
    int rc = mdb_dbi_open(txn, "entries", MDB_CREATE, &a.entries);
    if (rc == 0) rc = mdb_dbi_open(txn, "used", MDB_CREATE, &a.used);
    if (rc == 0) rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &a.meta);
    if (rc != 0) return rc;
    const std::string schema_key = "schema";
    MDB_val k = val(schema_key), v;
    rc = mdb_get(txn, a.meta, &k, &v);
    if (rc == 0) {
      found_schema.assign(static_cast<const char*>(v.mv_data), v.mv_size);
      return 0;
    }
    if (rc != MDB_NOTFOUND) return rc;
    MDB_stat st;
    if ((rc = mdb_stat(txn, a.entries, &st)) != 0) return rc;
    if (st.ms_entries != 0) {
      found_schema = "(none)";  // entries without a schema: not ours to trust
      return 0;
    }
    found_schema = options.schema;
    MDB_val s = val(options.schema);
    return mdb_put(txn, a.meta, &k, &s, 0);
  });
  if (rc == 0 && found_schema == options.schema) rc = adopt_key(*a.env, a, key_id);
  if (rc != 0) {
    a.why = mdb_strerror(rc);
    a.result = is_broken_store_error(rc) ? LmdbEnv::Opened::Broken : LmdbEnv::Opened::Failed;
    a.env.reset();
  } else if (found_schema != options.schema) {
    a.why = "its schema is " + found_schema + ", this build needs " + options.schema;
    a.result = LmdbEnv::Opened::Broken;
    a.env.reset();
  }
  return a;
}

std::string corrupt_marker(const std::string& path) {
  return path + ".corrupt";
}

// Keeps the last broken store for a post-mortem; older ones are replaced.
void move_aside(const std::string& path) {
  std::error_code ec;
  fs::rename(path, path + ".broken", ec);
  fs::remove(path + "-lock", ec);
  fs::remove(corrupt_marker(path), ec);
}

}  // namespace

std::unique_ptr<VerdictCache> VerdictCache::open(const CacheOptions& options, Status* status) {
  auto warn = options.warn ? options.warn : default_warn;
  if (options.dir.empty()) {
    *status = Status::error("no cache directory: set SHARDPROOF_CACHE_DIR (or HOME)");
    return nullptr;
  }
  // Whoever can write the directory or the store could plant verdicts.
  if (Status s = make_private_dir(options.dir, kNoOtherWrite); !s.ok()) {
    *status = Status::error("the cache directory: " + s.message());
    return nullptr;
  }
  std::string path = options.dir + "/verdicts.mdb";
  for (const std::string& file : {path, path + "-lock", options.dir + "/open.lock"}) {
    if (Status s = check_private_file(file, kNoOtherWrite); !s.ok()) {
      *status = Status::error("the verdict cache: " + s.message());
      return nullptr;
    }
  }
  std::optional<MacKey> key =
      load_or_create_key(options.key_file.empty() ? default_key_file() : options.key_file, status);
  if (!key) return nullptr;
  const std::string id = key_id(*key);
  OpenLock lock(options.dir + "/open.lock");
  std::error_code ec;
  if (fs::exists(corrupt_marker(path), ec)) {
    move_aside(path);
    warn("the verdict cache at " + path + " was found damaged earlier; moved it to " + path +
         ".broken and started an empty one");
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    OpenAttempt a = try_open(options, path, id);
    if (a.result == LmdbEnv::Opened::Ok) {
      if (!a.foreign.empty())
        warn("the verdict cache at " + path +
             " was written under another key (copied from another user, machine or job?); its " +
             a.foreign + " are not trusted and were dropped: they will be re-proved");
      std::unique_ptr<VerdictCache> cache(
          new VerdictCache(options, path, std::move(a.env), a.entries, a.used, a.meta, *key));
      std::string problem;
      RemoteSettings remote = options.remote ? *options.remote : remote_settings_from_env(&problem);
      if (!problem.empty()) warn(problem);
      cache->remote_ = RemoteStore::open(remote, warn);
      return cache;
    }
    if (a.result == LmdbEnv::Opened::Broken && attempt == 0) {
      move_aside(path);
      warn("the verdict cache at " + path + " could not be used (" + a.why + "); moved it to " +
           path + ".broken and started an empty one");
      continue;
    }
    *status = Status::error("cannot open the verdict cache at " + path + ": " + a.why);
    return nullptr;
  }
  return nullptr;
}

VerdictCache::VerdictCache(const CacheOptions& options, std::string path,
                           std::unique_ptr<LmdbEnv> env, MDB_dbi entries, MDB_dbi used,
                           MDB_dbi meta, const MacKey& key)
    : options_(options),
      path_(std::move(path)),
      env_(std::move(env)),
      entries_(entries),
      used_(used),
      meta_(meta),
      key_(key) {
  if (!options_.warn) options_.warn = default_warn;
}

VerdictCache::~VerdictCache() {
  flush();
}

void VerdictCache::warn(const std::string& message) {
  options_.warn(message);
}

void VerdictCache::note_error(const char* what, int rc) {
  ++pending_errors_;
  if (is_broken_store_error(rc)) {
    if (broken_.exchange(true)) return;
    // Next open moves it aside; until then this process stops using it.
    ::close(::open(corrupt_marker(path_).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    warn(std::string("the verdict cache is damaged (") + what + ": " + mdb_strerror(rc) +
         "); it is no longer used and will be rebuilt");
    return;
  }
  std::call_once(write_warning_, [&] {
    warn(std::string("the verdict cache could not ") + what + " (" + mdb_strerror(rc) +
         "); continuing without it where needed");
  });
}

std::optional<std::string> VerdictCache::get(EntryKind kind, const std::string& key_hex,
                                             const std::string& digest_hex) {
  std::optional<std::string> key = make_key(kind, key_hex);
  std::optional<Hash128> digest = parse_hash128(digest_hex);
  if (!key || !digest) {
    ++pending_misses_;
    return std::nullopt;
  }
  std::optional<std::string> payload;
  bool damaged = false;
  auto start = std::chrono::steady_clock::now();
  int rc = broken_ ? MDB_NOTFOUND : env_->read([&](MDB_txn* txn) {
    MDB_val k = val(*key), v;
    int rc = mdb_get(txn, entries_, &k, &v);
    if (rc != 0) return rc;
    std::optional<Record> record =
        decode_record(std::string_view(static_cast<const char*>(v.mv_data), v.mv_size), key_, *key);
    // A damaged or forged record, or one filed under this key for other
    // bytes: never trusted.
    if (!record || record->digest != *digest) {
      damaged = true;
      return 0;
    }
    payload = std::move(record->payload);
    return 0;
  });
  pending_lookup_us_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                  std::chrono::steady_clock::now() - start)
                                                  .count());
  if (rc != 0 && rc != MDB_NOTFOUND) note_error("be read", rc);
  if (!payload) {
    ++pending_misses_;
    if (damaged) {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      pending_drop_.insert(*key);
    }
    // Read-through: a record the team proved is copied here (it replaces a
    // damaged one), so the next lookup stays local.
    if (!remote_) return std::nullopt;
    std::optional<Record> shared = remote_->get(*key, *digest);
    if (!shared) return std::nullopt;
    put_local(*key, *shared);
    return std::move(shared->payload);
  }
  ++pending_hits_;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_used_[*key] = now_ms();  // written by the owner's next flush()
  return payload;
}

void VerdictCache::put(EntryKind kind, const std::string& key_hex, const std::string& digest_hex,
                       const std::string& payload, double solve_seconds) {
  std::optional<std::string> key = make_key(kind, key_hex);
  std::optional<Hash128> digest = parse_hash128(digest_hex);
  if (!key || !digest) return;
  Record record{*digest, now_ms(), solve_seconds, payload};
  put_local(*key, record);
  if (remote_) remote_->put(*key, record);  // write-back: the team need not prove it again
}

void VerdictCache::put_local(const std::string& key_bytes, const Record& fields) {
  if (broken_) return;
  const std::string* key = &key_bytes;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_drop_.erase(*key);  // the new record replaces a damaged one
    pending_used_.erase(*key);
  }
  uint64_t now = now_ms();  // used now, whenever it was stored
  std::string record = encode_record(fields, key_, *key);
  uint64_t total = 0;
  auto body = [&](MDB_txn* txn) {
    MDB_val k = val(*key), old;
    uint64_t before = read_u64(txn, meta_, "bytes");
    int rc = mdb_get(txn, entries_, &k, &old);
    if (rc == 0)
      before -= std::min(before, entry_size(old.mv_size));
    else if (rc != MDB_NOTFOUND)
      return rc;
    MDB_val v = val(record), t = val(&now, sizeof now);
    if ((rc = mdb_put(txn, entries_, &k, &v, 0)) != 0) return rc;
    if ((rc = mdb_put(txn, used_, &k, &t, 0)) != 0) return rc;
    total = before + entry_size(record.size());
    return write_u64(txn, meta_, "bytes", total);
  };
  int rc = env_->write(body);
  if (rc == MDB_MAP_FULL) {
    // The map is at its limit (LMDB needs room beyond the entries' bytes):
    // make room by evicting half, then try once more.
    env_->write(
        [&](MDB_txn* txn) { return evict(txn, read_u64(txn, meta_, "bytes") / 2, 0, nullptr); });
    rc = env_->write(body);
  }
  if (rc != 0) {
    note_error("store an entry", rc);
    return;
  }
  if (total > options_.max_bytes) evict_if_over_cap();
}

void VerdictCache::evict_if_over_cap() {
  flush();  // recent hits count as recent use
  // Down to 90% of the cap, so the next few stores do not evict again.
  uint64_t target = options_.max_bytes / 10 * 9;
  int rc = env_->write([&](MDB_txn* txn) { return evict(txn, target, 0, nullptr); });
  if (rc != 0) note_error("evict entries", rc);
}

int VerdictCache::evict(MDB_txn* txn, uint64_t target, uint64_t min_used, GcResult* result) {
  struct Entry {
    std::string key;
    uint64_t size = 0;
    uint64_t used = 0;  // 0: never recorded, the first to go
  };
  std::vector<Entry> entries;
  std::unordered_map<std::string, size_t> index;
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn, entries_, &cursor);
  if (rc != 0) return rc;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    index.emplace(std::string(static_cast<const char*>(k.mv_data), k.mv_size), entries.size());
    entries.push_back(
        {std::string(static_cast<const char*>(k.mv_data), k.mv_size), entry_size(v.mv_size), 0});
  }
  mdb_cursor_close(cursor);
  if (rc != MDB_NOTFOUND) return rc;
  // Use times; a time without its entry is left over from a crash: dropped.
  std::vector<std::string> orphans;
  if ((rc = mdb_cursor_open(txn, used_, &cursor)) != 0) return rc;
  for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    std::string key(static_cast<const char*>(k.mv_data), k.mv_size);
    auto it = index.find(key);
    if (it == index.end()) {
      orphans.push_back(key);
    } else if (v.mv_size == sizeof(uint64_t)) {
      std::memcpy(&entries[it->second].used, v.mv_data, sizeof(uint64_t));
    }
  }
  mdb_cursor_close(cursor);
  if (rc != MDB_NOTFOUND) return rc;
  for (const std::string& key : orphans) {
    MDB_val ok = val(key);
    mdb_del(txn, used_, &ok, nullptr);
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  uint64_t total = 0;
  for (const Entry& e : entries) total += e.size;
  GcResult r;
  for (const Entry& e : entries) {
    if (e.used >= min_used && total <= target) {
      ++r.kept;
      r.kept_bytes += e.size;
      continue;
    }
    MDB_val ek = val(e.key);
    if ((rc = mdb_del(txn, entries_, &ek, nullptr)) != 0) return rc;
    rc = mdb_del(txn, used_, &ek, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return rc;
    total -= e.size;
    ++r.removed;
    r.removed_bytes += e.size;
  }
  if (result) *result = r;
  // Recomputed from the entries: the accounting heals itself here.
  return write_u64(txn, meta_, "bytes", total);
}

void VerdictCache::flush() {
  if (broken_) return;
  std::unordered_map<std::string, uint64_t> used;
  std::unordered_set<std::string> drop;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    used.swap(pending_used_);
    drop.swap(pending_drop_);
  }
  uint64_t hits = pending_hits_.exchange(0), misses = pending_misses_.exchange(0);
  uint64_t errors = pending_errors_.exchange(0), lookup_us = pending_lookup_us_.exchange(0);
  RemoteCounters r = remote_ ? remote_->take_counters() : RemoteCounters{};
  if (used.empty() && drop.empty() && hits == 0 && misses == 0 && errors == 0 && r.requests == 0 &&
      r.errors == 0)
    return;
  int rc = env_->write([&](MDB_txn* txn) {
    int rc = 0;
    for (const auto& [key, time] : used) {
      MDB_val k = val(key), v, t = val(&time, sizeof time);
      if (mdb_get(txn, entries_, &k, &v) != 0) continue;  // evicted meanwhile
      if ((rc = mdb_put(txn, used_, &k, &t, 0)) != 0) return rc;
    }
    uint64_t bytes = read_u64(txn, meta_, "bytes");
    for (const std::string& key : drop) {
      MDB_val k = val(key), v;
      if (mdb_get(txn, entries_, &k, &v) != 0) continue;
      bytes -= std::min(bytes, entry_size(v.mv_size));
      if ((rc = mdb_del(txn, entries_, &k, nullptr)) != 0) return rc;
      mdb_del(txn, used_, &k, nullptr);
    }
    if ((rc = write_u64(txn, meta_, "bytes", bytes)) != 0) return rc;
    for (const auto& [name, add] : counter_values(hits, misses, errors, lookup_us, r))
      if ((rc = write_u64(txn, meta_, name, read_u64(txn, meta_, name) + add)) != 0) return rc;
    return 0;
  });
  if (rc != 0) note_error("record use times", rc);
  env_->sync();
}

bool VerdictCache::has_pending() {
  if (pending_hits_ > 0 || pending_misses_ > 0) return true;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  return !pending_used_.empty() || !pending_drop_.empty();
}

Status VerdictCache::stats(CacheStats* out) {
  flush();
  CacheStats s;
  s.path = path_;
  s.max_bytes = options_.max_bytes;
  if (remote_) {
    s.remote_url = remote_->url();
    s.remote_writable = remote_->writable();
  }
  int rc = env_->read([&](MDB_txn* txn) {
    MDB_cursor* cursor = nullptr;
    int rc = mdb_cursor_open(txn, entries_, &cursor);
    if (rc != 0) return rc;
    MDB_val k, v;
    for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
      uint8_t kind = k.mv_size > 0 ? static_cast<const uint8_t*>(k.mv_data)[0] : 0;
      if (kind == static_cast<uint8_t>(EntryKind::Plan))
        ++s.plan_entries;
      else
        ++s.stage_entries;
    }
    mdb_cursor_close(cursor);
    if (rc != MDB_NOTFOUND) return rc;
    s.bytes = read_u64(txn, meta_, "bytes");
    s.hits = read_u64(txn, meta_, "hits");
    s.misses = read_u64(txn, meta_, "misses");
    s.errors = read_u64(txn, meta_, "errors");
    s.lookup_us = read_u64(txn, meta_, "lookup_us");
    RemoteCounters& r = s.remote;
    for (auto [name, field] : {std::pair{"remote_hits", &r.hits},
                               {"remote_misses", &r.misses},
                               {"remote_rejected", &r.rejected},
                               {"remote_errors", &r.errors},
                               {"remote_writes", &r.writes},
                               {"remote_requests", &r.requests},
                               {"remote_latency_us", &r.latency_us}})
      *field = read_u64(txn, meta_, name);
    return 0;
  });
  if (rc != 0)
    return Status::error(std::string("cannot read the verdict cache: ") + mdb_strerror(rc));
  std::error_code ec;
  s.file_bytes = fs::file_size(path_, ec);
  if (ec) s.file_bytes = 0;
  *out = s;
  return Status();
}

Status VerdictCache::gc(std::optional<uint64_t> max_bytes, std::optional<int64_t> max_age_seconds,
                        GcResult* result) {
  flush();
  uint64_t target = max_bytes.value_or(std::numeric_limits<uint64_t>::max());
  uint64_t min_used = 0;
  if (max_age_seconds) {
    uint64_t age_ms = static_cast<uint64_t>(*max_age_seconds) * 1000;
    uint64_t now = now_ms();
    min_used = age_ms < now ? now - age_ms : 0;
  }
  int rc = env_->write([&](MDB_txn* txn) { return evict(txn, target, min_used, result); });
  if (rc != 0)
    return Status::error(std::string("cannot collect the verdict cache: ") + mdb_strerror(rc));
  env_->sync();
  return Status();
}

Status VerdictCache::clear() {
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    pending_used_.clear();
    pending_drop_.clear();
  }
  pending_hits_ = 0;
  pending_misses_ = 0;
  pending_errors_ = 0;
  pending_lookup_us_ = 0;
  if (remote_) remote_->take_counters();
  int rc = env_->write([&](MDB_txn* txn) {
    int rc = mdb_drop(txn, entries_, 0);
    if (rc == 0) rc = mdb_drop(txn, used_, 0);
    if (rc == 0) rc = write_u64(txn, meta_, "bytes", 0);
    for (const auto& [name, zero] : counter_values(0, 0, 0, 0, RemoteCounters{}))
      if (rc == 0) rc = write_u64(txn, meta_, name, zero);
    return rc;
  });
  if (rc != 0)
    return Status::error(std::string("cannot clear the verdict cache: ") + mdb_strerror(rc));
  env_->sync();
  return Status();
}

}  // namespace shardproof::cache
