#include "cache/lmdb_env.h"

#include <algorithm>
#include <mutex>

namespace shardproof::cache {

bool is_broken_store_error(int rc) {
  return rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED ||
         rc == MDB_PANIC || rc == MDB_INCOMPATIBLE || rc == MDB_PAGE_NOTFOUND;
}

LmdbEnv::Opened LmdbEnv::open(const std::string& path, uint64_t map_bytes, uint64_t map_limit,
                              std::unique_ptr<LmdbEnv>* out, std::string* why) {
  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc == 0) rc = mdb_env_set_maxdbs(env, 4);
  if (rc == 0) rc = mdb_env_set_maxreaders(env, 510);
  if (rc == 0) rc = mdb_env_set_mapsize(env, map_bytes);
  // NOTLS: read transactions are not tied to threads (the daemon's solver
  // threads come and go). NOSYNC: commits do not wait for the disk; the cache
  // syncs after each verification, and a process crash loses nothing.
  if (rc == 0) rc = mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOTLS | MDB_NOSYNC, 0600);
  if (rc != 0) {
    *why = mdb_strerror(rc);
    if (env) mdb_env_close(env);
    return is_broken_store_error(rc) ? Opened::Broken : Opened::Failed;
  }
  // Reader slots of processes killed mid-read (kill -9) would pin old pages.
  int stale = 0;
  mdb_reader_check(env, &stale);
  out->reset(new LmdbEnv(env, std::max(map_limit, map_bytes)));
  return Opened::Ok;
}

LmdbEnv::~LmdbEnv() {
  mdb_env_close(env_);
}

int LmdbEnv::begin(unsigned flags, MDB_txn** txn) {
  return mdb_txn_begin(env_, nullptr, flags, txn);
}

int LmdbEnv::read(const std::function<int(MDB_txn*)>& body) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    int rc;
    {
      std::shared_lock<std::shared_mutex> lock(resize_);
      MDB_txn* txn = nullptr;
      rc = begin(MDB_RDONLY, &txn);
      if (rc == 0) {
        rc = body(txn);
        mdb_txn_abort(txn);
      }
    }
    if (rc != MDB_MAP_RESIZED) return rc;
    adopt_resize();
  }
  return MDB_MAP_RESIZED;
}

int LmdbEnv::write(const std::function<int(MDB_txn*)>& body) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    int rc;
    {
      std::shared_lock<std::shared_mutex> lock(resize_);
      MDB_txn* txn = nullptr;
      rc = begin(0, &txn);
      if (rc == 0) {
        rc = body(txn);
        if (rc == 0)
          rc = mdb_txn_commit(txn);  // frees the transaction even when it fails
        else
          mdb_txn_abort(txn);
      }
    }
    if (rc == MDB_MAP_RESIZED) {
      adopt_resize();
      continue;
    }
    if (rc == MDB_MAP_FULL && grow()) continue;
    return rc;
  }
  return MDB_MAP_FULL;
}

void LmdbEnv::sync() {
  mdb_env_sync(env_, 1);
}

uint64_t LmdbEnv::map_bytes() {
  std::shared_lock<std::shared_mutex> lock(resize_);
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  return info.me_mapsize;
}

bool LmdbEnv::grow() {
  std::unique_lock<std::shared_mutex> lock(resize_);
  MDB_envinfo info;
  mdb_env_info(env_, &info);
  if (info.me_mapsize >= map_limit_) return false;
  uint64_t next = std::min<uint64_t>(map_limit_, uint64_t{info.me_mapsize} * 2);
  return mdb_env_set_mapsize(env_, next) == 0;
}

// Another process grew the map: take its size (0 = the size in the file).
void LmdbEnv::adopt_resize() {
  std::unique_lock<std::shared_mutex> lock(resize_);
  mdb_env_set_mapsize(env_, 0);
}

}  // namespace shardproof::cache
