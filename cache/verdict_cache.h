// The verdict cache: an LMDB store of definite answers, shared by the daemon
// and in-process runs (LMDB locks across processes). Two kinds of entries:
// stage outcomes (position-based, see engine/decide/outcome_codec.h) under their
// stage key, and whole-plan reports under a digest of the plan's text. Each
// entry carries the digest it must match, its solve time and when it was last
// used; the store keeps a size cap by evicting the least recently used.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cache/cache_key.h"
#include "cache/lmdb_env.h"
#include "cache/record.h"
#include "cache/remote_store.h"
#include "engine/core/status.h"

namespace shardproof::cache {

// Bumped whenever the layout of entries changes: a store with another schema
// is moved aside and rebuilt, never read. 2: records carry a keyed MAC.
constexpr const char* kSchema = "shardproof-cache/2";

enum class EntryKind : uint8_t { Stage = 1, Plan = 2 };

struct CacheOptions {
  std::string dir;                         // holds verdicts.mdb and its lock file
  uint64_t max_bytes = uint64_t{1} << 30;  // entries beyond it evict the least recently used
  uint64_t initial_map_bytes = 64u << 20;  // LMDB map to start with; grows when full
  uint64_t max_map_bytes = 0;  // where growth stops and eviction starts; 0: 2 * max_bytes + 64 MiB
  std::string schema = kSchema;  // tests open with another to simulate an old store
  // The secret that authenticates records (cache_key.h); empty: default_key_file().
  std::string key_file;
  // Where warnings go (a store moved aside, a write that failed); default stderr.
  std::function<void(const std::string&)> warn;
  // The shared tier behind this store (remote_store.h); nullopt: from the
  // environment (remote_settings_from_env), an empty url: none.
  std::optional<RemoteSettings> remote;
};

struct CacheStats {
  std::string path;  // the data file
  int64_t stage_entries = 0;
  int64_t plan_entries = 0;
  uint64_t bytes = 0;       // entries' keys and records
  uint64_t file_bytes = 0;  // the data file on disk (LMDB never shrinks it)
  uint64_t max_bytes = 0;
  uint64_t hits = 0, misses = 0;  // lookups since the store was created or cleared
  uint64_t errors = 0;            // reads and writes of the store that failed
  uint64_t lookup_us = 0;         // time spent in lookups of the store
  // The remote tier: its address (empty: none), and what it did for the
  // processes that used this store since it was created or cleared.
  std::string remote_url;
  bool remote_writable = false;
  RemoteCounters remote;

  int64_t entries() const { return stage_entries + plan_entries; }
  double hit_rate() const {
    return hits + misses == 0 ? 0.0
                              : static_cast<double>(hits) / static_cast<double>(hits + misses);
  }
};

struct GcResult {
  int64_t removed = 0;
  uint64_t removed_bytes = 0;
  int64_t kept = 0;
  uint64_t kept_bytes = 0;
};

class VerdictCache {
 public:
  // Opens (creating) the store in options.dir. The directory and the store
  // must be this user's and not writable by others (private_path.h), else
  // the cache is refused. A store that is truncated, damaged, cannot be
  // read or has another schema is moved aside (to verdicts.mdb.broken) with
  // a warning and rebuilt empty; one written under another key is emptied
  // with a warning (its records would fail authentication). Null with
  // `status` set when the cache is refused or even rebuilding fails.
  static std::unique_ptr<VerdictCache> open(const CacheOptions& options, Status* status);
  ~VerdictCache();  // flushes

  // The payload stored under `key` when its record is intact and carries
  // `digest`; counts a hit or a miss and marks the entry used (in memory,
  // until flush(): a lookup never writes, so it never waits for a writer).
  std::optional<std::string> get(EntryKind kind, const std::string& key, const std::string& digest);
  // Stores (or replaces) an entry; may evict others to stay under the cap.
  // Failures are warnings: a cache that cannot write only makes things slower.
  void put(EntryKind kind, const std::string& key, const std::string& digest,
           const std::string& payload, double solve_seconds);
  // Writes pending use times and hit counts, and syncs the file.
  void flush();
  // Whether anything waits for flush().
  bool has_pending();

  Status stats(CacheStats* out);
  // Removes entries unused for `max_age_seconds`, then the least recently
  // used until at most `max_bytes` remain (each only when given).
  Status gc(std::optional<uint64_t> max_bytes, std::optional<int64_t> max_age_seconds,
            GcResult* result);
  Status clear();

  const std::string& path() const { return path_; }
  uint64_t max_bytes() const { return options_.max_bytes; }
  // The remote tier, or null.
  RemoteStore* remote() { return remote_.get(); }

 private:
  VerdictCache(const CacheOptions& options, std::string path, std::unique_ptr<LmdbEnv> env,
               MDB_dbi entries, MDB_dbi used, MDB_dbi meta, const MacKey& key);
  void warn(const std::string& message);
  // Stores a record in this machine's store only. `key`: kind and hash.
  void put_local(const std::string& key, const Record& record);
  void note_error(const char* what, int rc);
  // Evicts least recently used entries (and those older than `min_used`)
  // until at most `target` bytes remain. Runs inside one write transaction.
  int evict(MDB_txn* txn, uint64_t target, uint64_t min_used, GcResult* result);
  void evict_if_over_cap();

  CacheOptions options_;
  std::string path_;
  std::unique_ptr<LmdbEnv> env_;
  MDB_dbi entries_, used_, meta_;
  MacKey key_;

  // Use times and counters are written in batches (flush), not on every hit.
  std::mutex pending_mutex_;
  std::unordered_map<std::string, uint64_t> pending_used_;
  std::unordered_set<std::string> pending_drop_;  // damaged records found by get()
  std::atomic<uint64_t> pending_hits_{0}, pending_misses_{0};
  std::atomic<uint64_t> pending_errors_{0}, pending_lookup_us_{0};
  std::unique_ptr<RemoteStore> remote_;
  std::atomic<bool> broken_{false};  // the file failed mid-run: stop using it
  std::once_flag write_warning_;
};

}  // namespace shardproof::cache
