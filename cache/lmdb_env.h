// A thin owner of one LMDB environment (one data file and its lock file):
// transactions that survive the map being grown by this process or another,
// and growth of the map when it is full. Everything else about the store's
// contents lives in verdict_cache.cpp.
#pragma once

#include <lmdb.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <shared_mutex>
#include <string>

namespace shardproof::cache {

class LmdbEnv {
 public:
  enum class Opened { Ok, Broken, Failed };

  // Opens (creating) the store at `path`. Broken: the file exists but is not
  // a usable LMDB store (garbage, another LMDB version); Failed: anything
  // else (permissions, no space), with the reason in `why`.
  static Opened open(const std::string& path, uint64_t map_bytes, uint64_t map_limit,
                     std::unique_ptr<LmdbEnv>* out, std::string* why);
  ~LmdbEnv();
  LmdbEnv(const LmdbEnv&) = delete;
  LmdbEnv& operator=(const LmdbEnv&) = delete;

  // Runs `body` in a read transaction; returns its result or an LMDB error.
  int read(const std::function<int(MDB_txn*)>& body);
  // Runs `body` in a write transaction and commits it. On MDB_MAP_FULL the
  // map grows (doubling, up to the limit) and `body` runs again in a fresh
  // transaction; MDB_MAP_FULL comes back only at the limit.
  int write(const std::function<int(MDB_txn*)>& body);
  // Flushes written data to disk (writes do not wait for the disk).
  void sync();

  uint64_t map_bytes();
  uint64_t map_limit() const { return map_limit_; }

 private:
  LmdbEnv(MDB_env* env, uint64_t map_limit) : env_(env), map_limit_(map_limit) {}
  int begin(unsigned flags, MDB_txn** txn);
  bool grow();
  void adopt_resize();

  MDB_env* env_;
  uint64_t map_limit_;
  // mdb_env_set_mapsize needs every transaction of this process closed:
  // transactions hold it shared, a resize holds it exclusively.
  std::shared_mutex resize_;
};

// True for errors that mean the store's file cannot be trusted.
bool is_broken_store_error(int rc);

}  // namespace shardproof::cache
