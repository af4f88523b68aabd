#include "cache/store_probe.h"

#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace shardproof::cache {
namespace {

// LMDB 0.9 on a 64-bit host: a page header of 16 bytes, then MDB_meta
// (magic, version, address, map size, two MDB_db of 48 bytes, last page,
// txn id). The page size is kept in the free table's md_pad.
constexpr uint32_t kMetaMagic = 0xBEEFC0DE;
constexpr size_t kMeta = 16;
constexpr size_t kPageSizeAt = kMeta + 4 + 4 + 8 + 8;  // mm_dbs[0].md_pad
constexpr size_t kLastPageAt = kMeta + 4 + 4 + 8 + 8 + 2 * 48;
constexpr size_t kMetaEnd = kLastPageAt + 8 + 8;

template <class T>
T at(const unsigned char* page, size_t offset) {
  T v;
  std::memcpy(&v, page + offset, sizeof v);
  return v;
}

// Touches every key and value of one table; an LMDB error code or 0.
int walk(MDB_txn* txn, MDB_dbi dbi, volatile unsigned char* sink) {
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn, dbi, &cursor);
  if (rc != 0) return rc;
  MDB_val k, v;
  for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    for (const MDB_val* x : {&k, &v}) {
      if (x->mv_size == 0) continue;
      const auto* bytes = static_cast<const unsigned char*>(x->mv_data);
      *sink = *sink ^ bytes[0] ^ bytes[x->mv_size - 1];
    }
  }
  mdb_cursor_close(cursor);
  return rc == MDB_NOTFOUND ? 0 : rc;
}

// In the child: 0 when every table could be walked.
int probe_in_child(const std::string& path) {
  volatile unsigned char sink = 0;
  MDB_env* env = nullptr;
  int rc = mdb_env_create(&env);
  if (rc == 0) rc = mdb_env_set_maxdbs(env, 4);
  // With the lock file, like any reader: another process may be writing the
  // store right now (the daemon and an in-process CLI share it). A reader
  // LMDB does not know of (MDB_NOLOCK) can see pages that writer is reusing,
  // and a healthy store was then moved aside as broken.
  if (rc == 0) rc = mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOTLS, 0600);
  MDB_txn* txn = nullptr;
  if (rc == 0) rc = mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn);
  if (rc != 0) txn = nullptr;
  MDB_dbi main = 0;
  if (rc == 0) rc = walk(txn, 0, &sink);  // the free list: writers read it
  if (rc == 0) rc = mdb_dbi_open(txn, nullptr, 0, &main);
  if (rc == 0) rc = walk(txn, main, &sink);
  for (const char* name : {"entries", "used", "meta"}) {
    MDB_dbi dbi = 0;
    if (rc != 0) break;
    rc = mdb_dbi_open(txn, name, 0, &dbi);
    if (rc == MDB_NOTFOUND) {
      rc = 0;
      continue;
    }
    if (rc == 0) rc = walk(txn, dbi, &sink);
  }
  if (txn) mdb_txn_abort(txn);
  txn = nullptr;
  // Writes touch what reads do not (page copies, splits, the free list):
  // the parent's first writes, in a transaction that is thrown away.
  if (rc == 0 && (rc = mdb_txn_begin(env, nullptr, 0, &txn)) != 0) txn = nullptr;
  for (const char* name : {"entries", "used", "meta"}) {
    if (rc != 0) break;
    MDB_dbi dbi = 0;
    if ((rc = mdb_dbi_open(txn, name, MDB_CREATE, &dbi)) != 0) break;
    char key[] = "shardproof-probe", value[64] = {};
    MDB_val k{sizeof key, key}, v{sizeof value, value};
    rc = mdb_put(txn, dbi, &k, &v, 0);
    if (rc == 0) rc = mdb_del(txn, dbi, &k, nullptr);
  }
  if (rc == MDB_MAP_FULL) rc = 0;  // full, not damaged: the parent grows or evicts
  if (txn) mdb_txn_abort(txn);     // nothing reaches the file
  return rc == 0 ? 0 : 1;
}

}  // namespace

bool store_file_fits(const std::string& path, std::string* why) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;  // missing: LMDB creates it
  struct stat st;
  bool fits = true;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    unsigned char page[kMetaEnd];
    uint64_t page_size = 0, needed = 0;
    for (int m = 0; m < 2; ++m) {
      off_t offset = static_cast<off_t>(m * page_size);
      if (m == 1 && page_size == 0) break;
      if (pread(fd, page, sizeof page, offset) != static_cast<ssize_t>(sizeof page)) break;
      if (at<uint32_t>(page, kMeta) != kMetaMagic) continue;
      if (m == 0) page_size = at<uint32_t>(page, kPageSizeAt);
      uint64_t last = at<uint64_t>(page, kLastPageAt);
      if (page_size > 0 && last < (uint64_t{1} << 40))
        needed = std::max(needed, (last + 1) * page_size);
    }
    if (needed > static_cast<uint64_t>(st.st_size)) {
      *why = "the file is " + std::to_string(st.st_size) + " bytes, its meta page says " +
             std::to_string(needed) + " (truncated)";
      fits = false;
    }
  }
  ::close(fd);
  return fits;
}

bool probe_store(const std::string& path, int timeout_ms, std::string* why) {
  if (::access(path.c_str(), F_OK) != 0) return true;
  pid_t child = fork();
  if (child < 0) return true;  // cannot tell: LMDB's own checks still apply
  if (child == 0) {
    // A crash here is the answer, not an event: plain signal death, without
    // the handlers of whoever hosts us (a sanitizer, a fuzzer, a debugger).
    // Straight to the kernel: a sanitizer's signal() interceptor may keep its own.
    struct {
      void (*handler)(int);
      unsigned long flags;
      void (*restorer)();
      unsigned long mask;
    } plain{SIG_DFL, 0, nullptr, 0};
    for (int signum : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
      syscall(SYS_rt_sigaction, signum, &plain, nullptr, sizeof plain.mask);
    _exit(probe_in_child(path));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  for (int pause_us = 200;; pause_us = std::min(pause_us * 2, 20'000)) {
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (done < 0 && errno != EINTR) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      *why = "reading it did not finish within " + std::to_string(timeout_ms / 1000) + " s";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  *why = WIFSIGNALED(status)
             ? std::string("reading it crashed (") + strsignal(WTERMSIG(status)) + ")"
             : std::string("LMDB cannot read all of it");
  return false;
}

}  // namespace shardproof::cache
