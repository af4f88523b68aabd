// The verdict cache under attack and damage (issue 22): a record rewritten
// without the user's key, or a store written under another key, is never
// believed; a cache directory, store or key that another user could write
// is refused; a truncated or scribbled store is moved aside, never mapped
// into a crash.
#include <gtest/gtest.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "cache/cache_key.h"
#include "cache/record.h"
#include "cache/verdict_cache.h"

namespace shardproof::cache {
namespace {

namespace fs = std::filesystem;

std::string hex_key(int n, char salt = 'a') {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%c%031x", salt, n);
  return buf;
}

// Rewrites every record of the store's "entries" table with `forge`
// (bytes in, bytes out), as someone with write access but no key would.
void rewrite_records(const std::string& path,
                     const std::function<std::string(std::string)>& forge) {
  MDB_env* env = nullptr;
  ASSERT_EQ(mdb_env_create(&env), 0);
  mdb_env_set_maxdbs(env, 4);
  ASSERT_EQ(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR, 0600), 0);
  MDB_txn* txn = nullptr;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, "entries", 0, &dbi), 0);
  MDB_cursor* cursor = nullptr;
  ASSERT_EQ(mdb_cursor_open(txn, dbi, &cursor), 0);
  MDB_val k, v;
  std::vector<std::pair<std::string, std::string>> rewritten;
  for (int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT))
    rewritten.emplace_back(std::string(static_cast<char*>(k.mv_data), k.mv_size),
                           forge(std::string(static_cast<char*>(v.mv_data), v.mv_size)));
  mdb_cursor_close(cursor);
  for (auto& [key, bytes] : rewritten) {
    MDB_val nk{key.size(), key.data()}, nv{bytes.size(), bytes.data()};
    ASSERT_EQ(mdb_put(txn, dbi, &nk, &nv, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

class CacheTrustTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sp-trust-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache";
  }
  void TearDown() override { fs::remove_all(root_); }

  CacheOptions options(const std::string& key = "key") {
    CacheOptions o;
    o.dir = dir_;
    o.key_file = root_ + "/state/" + key;
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    return o;
  }
  std::unique_ptr<VerdictCache> open(const CacheOptions& o, Status* status = nullptr) {
    Status ignored;
    return VerdictCache::open(o, status ? status : &ignored);
  }

  std::string root_, dir_;
  std::vector<std::string> warnings_;
};

// The forger knows the record layout of shardproof-cache/1 (magic, digest,
// time, seconds, length at 36, XXH3 of the payload at 44, payload at 52)
// and recomputes the checksum after turning a refutation into a proof.
TEST_F(CacheTrustTest, RecordRewrittenWithoutTheKeyIsNeverBelieved) {
  {
    auto c = open(options());
    ASSERT_TRUE(c);
    c->put(EntryKind::Stage, hex_key(1), hex_key(1, 'd'), R"({"status":"refuted"})", 0.1);
    ASSERT_EQ(c->get(EntryKind::Stage, hex_key(1), hex_key(1, 'd')), R"({"status":"refuted"})");
  }
  rewrite_records(dir_ + "/verdicts.mdb", [](std::string bytes) {
    const std::string from = "refuted", to = "proven\"";
    size_t at = bytes.find(from);
    if (at != std::string::npos) bytes.replace(at, from.size(), to);
    uint64_t length = bytes.size() - 52;
    uint64_t checksum = XXH3_64bits(bytes.data() + 52, length);
    std::memcpy(bytes.data() + 36, &length, 8);
    std::memcpy(bytes.data() + 44, &checksum, 8);
    return bytes;
  });
  auto c = open(options());
  ASSERT_TRUE(c);
  std::optional<std::string> got = c->get(EntryKind::Stage, hex_key(1), hex_key(1, 'd'));
  EXPECT_FALSE(got) << "a forged record was believed: " << *got;
}

TEST_F(CacheTrustTest, RecordsOfAnotherKeyAreNeverBelieved) {
  MacKey mine{}, theirs{};
  theirs[0] = 1;
  Record r;
  r.digest = *parse_hash128(hex_key(5));
  r.payload = "proven";
  std::string entry = "\x01" + std::string(16, 'k');
  std::string bytes = encode_record(r, theirs, entry);
  ASSERT_TRUE(decode_record(bytes, theirs, entry));
  EXPECT_FALSE(decode_record(bytes, mine, entry));
  EXPECT_FALSE(decode_record(bytes, theirs, "\x01" + std::string(16, 'j')))
      << "moved to another key";
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= 0x01;
    EXPECT_FALSE(decode_record(damaged, theirs, entry)) << "flipped byte " << i;
  }
}

// A store copied from another user, machine or CI job (another key).
TEST_F(CacheTrustTest, StoreWrittenUnderAnotherKeyIsEmptiedAndSaysSo) {
  {
    auto c = open(options("theirs"));
    ASSERT_TRUE(c);
    c->put(EntryKind::Stage, hex_key(1), hex_key(1), "proven", 0);
  }
  EXPECT_TRUE(warnings_.empty());
  auto c = open(options("mine"));
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->get(EntryKind::Stage, hex_key(1), hex_key(1)));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("another key"), std::string::npos) << warnings_[0];
  CacheStats s;
  ASSERT_TRUE(c->stats(&s).ok());
  EXPECT_EQ(s.entries(), 0);
}

TEST_F(CacheTrustTest, KeyIsCreatedPrivateAndAnOpenOneIsRefused) {
  ASSERT_TRUE(open(options()));
  struct stat st;
  ASSERT_EQ(stat((root_ + "/state/key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  chmod((root_ + "/state/key").c_str(), 0644);
  Status status;
  EXPECT_FALSE(open(options(), &status));
  EXPECT_NE(status.message().find("other users can access it"), std::string::npos)
      << status.message();
}

TEST_F(CacheTrustTest, CacheDirectoryOthersCanWriteIsRefused) {
  fs::create_directories(dir_);
  chmod(dir_.c_str(), 0777);
  Status status;
  EXPECT_FALSE(open(options(), &status));
  EXPECT_NE(status.message().find("other users can write to it"), std::string::npos)
      << status.message();
  chmod(dir_.c_str(), 0700);
  ASSERT_TRUE(open(options()));
  chmod((dir_ + "/verdicts.mdb").c_str(), 0666);  // a store others can rewrite
  EXPECT_FALSE(open(options(), &status));
  EXPECT_NE(status.message().find("verdicts.mdb"), std::string::npos) << status.message();
}

TEST_F(CacheTrustTest, SymlinkedCacheDirectoryIsRefused) {
  fs::create_directories(root_ + "/elsewhere");
  chmod((root_ + "/elsewhere").c_str(), 0700);
  fs::create_directory_symlink(root_ + "/elsewhere", dir_);
  Status status;
  EXPECT_FALSE(open(options(), &status));
  EXPECT_NE(status.message().find("not a directory"), std::string::npos) << status.message();
}

// Enough entries for a store of many pages, some records spanning pages.
void fill(VerdictCache& c, int n) {
  for (int i = 0; i < n; ++i)
    c.put(EntryKind::Stage, hex_key(i), hex_key(i), std::string(100 + (i % 7) * 1500, 'p'), 0);
  c.flush();
}

TEST_F(CacheTrustTest, TruncatedStoreIsMovedAsideNotMapped) {
  {
    auto c = open(options());
    ASSERT_TRUE(c);
    fill(*c, 400);
  }
  std::string path = dir_ + "/verdicts.mdb";
  fs::resize_file(path, fs::file_size(path) / 3);
  auto c = open(options());  // on a store mapped as it is: SIGBUS on the lost pages
  ASSERT_TRUE(c);
  for (int i = 0; i < 400; ++i) c->get(EntryKind::Stage, hex_key(i), hex_key(i));
  ASSERT_FALSE(warnings_.empty());
  EXPECT_NE(warnings_[0].find("truncated"), std::string::npos) << warnings_[0];
  EXPECT_TRUE(fs::exists(path + ".broken"));
  CacheStats s;
  ASSERT_TRUE(c->stats(&s).ok());
  EXPECT_EQ(s.entries(), 0);
}

TEST_F(CacheTrustTest, ScribbledStoreNeverCrashesAReader) {
  std::string path = dir_ + "/verdicts.mdb";
  std::mt19937 rng(22);
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    {
      auto c = open(options());
      ASSERT_TRUE(c);
      c->clear();
      fill(*c, 300);
    }
    // Random bytes over random pages past the two meta pages.
    {
      std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
      const uint64_t pages = fs::file_size(path) / 4096;
      for (int k = 0; k < 12; ++k) {
        uint64_t page = 2 + rng() % (pages - 2);
        f.seekp(static_cast<std::streamoff>(page * 4096 + rng() % 4000));
        for (int b = 0; b < 64; ++b) f.put(static_cast<char>(rng()));
      }
    }
    auto c = open(options());
    ASSERT_TRUE(c);
    int hits = 0;
    for (int i = 0; i < 300; ++i) hits += c->get(EntryKind::Stage, hex_key(i), hex_key(i)) ? 1 : 0;
    CacheStats s;
    c->stats(&s);
    EXPECT_LE(hits, 300);
  }
}

}  // namespace
}  // namespace shardproof::cache
