// The LMDB verdict cache on its own: entries only come back with their
// digest, a damaged or foreign store is moved aside and rebuilt, the size
// cap evicts the least recently used, a full map grows or evicts, and two
// processes can write at once.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/record.h"
#include "cache/verdict_cache.h"
#include "engine/core/units.h"

namespace shardproof::cache {
namespace {

namespace fs = std::filesystem;

// 32 hex digits that differ with n (salt: a hex digit too).
std::string hex_key(int n, char salt = 'a') {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%c%031x", salt, n);
  return buf;
}

class VerdictCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sp-cache-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  CacheOptions options() {
    CacheOptions o;
    o.dir = dir_;
    o.warn = [this](const std::string& w) { warnings_.push_back(w); };
    return o;
  }

  std::unique_ptr<VerdictCache> open(const CacheOptions& o) {
    Status status;
    std::unique_ptr<VerdictCache> c = VerdictCache::open(o, &status);
    EXPECT_TRUE(c) << status.message();
    return c;
  }

  CacheStats stats(VerdictCache& c) {
    CacheStats s;
    EXPECT_TRUE(c.stats(&s).ok());
    return s;
  }

  std::string dir_;
  std::vector<std::string> warnings_;
};

TEST_F(VerdictCacheTest, EntriesComeBackOnlyWithTheirDigest) {
  auto c = open(options());
  c->put(EntryKind::Stage, hex_key(1), hex_key(1, 'd'), "outcome one", 0.5);
  EXPECT_EQ(c->get(EntryKind::Stage, hex_key(1), hex_key(1, 'd')), "outcome one");
  EXPECT_FALSE(c->get(EntryKind::Stage, hex_key(1), hex_key(2, 'd'))) << "digest mismatch";
  EXPECT_FALSE(c->get(EntryKind::Plan, hex_key(1), hex_key(1, 'd'))) << "kinds do not mix";
  EXPECT_FALSE(c->get(EntryKind::Stage, hex_key(2), hex_key(1, 'd')));
  EXPECT_FALSE(c->get(EntryKind::Stage, "not hex", hex_key(1, 'd')));
  CacheStats s = stats(*c);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 4u);
  // The mismatching record was dropped: it cannot be trusted for anyone.
  EXPECT_EQ(s.entries(), 0);
}

TEST_F(VerdictCacheTest, EntriesAndCountsSurviveReopening) {
  {
    auto c = open(options());
    c->put(EntryKind::Stage, hex_key(1), hex_key(1), "stage", 1.0);
    c->put(EntryKind::Plan, hex_key(2), hex_key(2), "report", 2.0);
    EXPECT_TRUE(c->get(EntryKind::Stage, hex_key(1), hex_key(1)));
  }
  auto c = open(options());
  EXPECT_EQ(c->get(EntryKind::Plan, hex_key(2), hex_key(2)), "report");
  CacheStats s = stats(*c);
  EXPECT_EQ(s.stage_entries, 1);
  EXPECT_EQ(s.plan_entries, 1);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_GT(s.bytes, 0u);
  EXPECT_GT(s.file_bytes, 0u);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_F(VerdictCacheTest, UnreadableStoreIsMovedAsideAndRebuilt) {
  std::ofstream(dir_ + "/verdicts.mdb", std::ios::binary) << std::string(8192, '\x5a');
  auto c = open(options());
  ASSERT_TRUE(c);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("moved it to"), std::string::npos) << warnings_[0];
  EXPECT_TRUE(fs::exists(dir_ + "/verdicts.mdb.broken"));
  c->put(EntryKind::Stage, hex_key(1), hex_key(1), "fresh", 0);
  EXPECT_EQ(c->get(EntryKind::Stage, hex_key(1), hex_key(1)), "fresh");
}

TEST_F(VerdictCacheTest, StoreOfAnotherSchemaIsNeverRead) {
  CacheOptions old = options();
  old.schema = "shardproof-cache/0";
  {
    auto c = open(old);
    c->put(EntryKind::Stage, hex_key(1), hex_key(1), "old layout", 0);
  }
  auto c = open(options());
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("schema"), std::string::npos) << warnings_[0];
  EXPECT_FALSE(c->get(EntryKind::Stage, hex_key(1), hex_key(1)));
  EXPECT_EQ(stats(*c).entries(), 0);
}

TEST_F(VerdictCacheTest, SizeCapEvictsTheLeastRecentlyUsed) {
  CacheOptions o = options();
  o.max_bytes = 64 << 10;
  auto c = open(o);
  std::string payload(1024, 'p');
  c->put(EntryKind::Stage, hex_key(0), hex_key(0), payload, 0);
  for (int i = 1; i < 200; ++i) {
    // Entry 0 is used all along; entries 1.. are stored once and forgotten.
    std::this_thread::sleep_for(std::chrono::microseconds(1100));
    ASSERT_TRUE(c->get(EntryKind::Stage, hex_key(0), hex_key(0))) << "evicted at " << i;
    c->put(EntryKind::Stage, hex_key(i), hex_key(i), payload, 0);
  }
  CacheStats s = stats(*c);
  EXPECT_LE(s.bytes, o.max_bytes);
  EXPECT_LT(s.entries(), 64);
  EXPECT_FALSE(c->get(EntryKind::Stage, hex_key(1), hex_key(1))) << "the oldest unused stayed";
  EXPECT_TRUE(c->get(EntryKind::Stage, hex_key(199), hex_key(199))) << "the newest went";
}

TEST_F(VerdictCacheTest, FullMapGrows) {
  CacheOptions o = options();
  o.initial_map_bytes = 256 << 10;
  auto c = open(o);
  std::string payload(4096, 'g');
  for (int i = 0; i < 400; ++i) c->put(EntryKind::Stage, hex_key(i), hex_key(i), payload, 0);
  EXPECT_EQ(stats(*c).entries(), 400) << "1.6 MiB must fit once the map has grown";
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
}

TEST_F(VerdictCacheTest, FullMapAtItsLimitEvicts) {
  CacheOptions o = options();
  o.initial_map_bytes = 256 << 10;
  o.max_map_bytes = 1 << 20;  // far below the cap: only eviction can make room
  auto c = open(o);
  std::string payload(4096, 'e');
  for (int i = 0; i < 600; ++i) c->put(EntryKind::Stage, hex_key(i), hex_key(i), payload, 0);
  EXPECT_TRUE(c->get(EntryKind::Stage, hex_key(599), hex_key(599))) << "the last store failed";
  CacheStats s = stats(*c);
  EXPECT_GT(s.entries(), 0);
  EXPECT_LT(s.entries(), 600);
}

TEST_F(VerdictCacheTest, GcByAgeAndSizeThenClear) {
  auto c = open(options());
  for (int i = 0; i < 10; ++i) c->put(EntryKind::Stage, hex_key(i), hex_key(i), "x", 0);
  GcResult r;
  ASSERT_TRUE(c->gc(std::nullopt, 3600, &r).ok());
  EXPECT_EQ(r.removed, 0) << "nothing is an hour old";
  EXPECT_EQ(r.kept, 10);
  uint64_t half = stats(*c).bytes / 2;
  ASSERT_TRUE(c->gc(half, std::nullopt, &r).ok());
  EXPECT_EQ(r.kept, 5);
  EXPECT_LE(stats(*c).bytes, half);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(c->gc(std::nullopt, 0, &r).ok());
  EXPECT_EQ(r.kept, 0);
  c->put(EntryKind::Plan, hex_key(1), hex_key(1), "y", 0);
  c->get(EntryKind::Plan, hex_key(1), hex_key(1));
  ASSERT_TRUE(c->clear().ok());
  CacheStats s = stats(*c);
  EXPECT_EQ(s.entries(), 0);
  EXPECT_EQ(s.bytes, 0u);
  EXPECT_EQ(s.hits + s.misses, 0u);
}

// The daemon and an in-process CLI share the store: writers in two processes.
TEST_F(VerdictCacheTest, TwoProcessesWriteAtOnce) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Status status;
    auto c = VerdictCache::open(options(), &status);
    if (!c) _exit(1);
    for (int i = 0; i < 300; ++i) c->put(EntryKind::Stage, hex_key(i, 'c'), hex_key(i), "child", 0);
    c.reset();
    // The child's warnings are its own: a store it moved aside is a failure too.
    for (const std::string& w : warnings_) std::fprintf(stderr, "child: %s\n", w.c_str());
    _exit(warnings_.empty() ? 0 : 2);
  }
  {
    auto c = open(options());
    for (int i = 0; i < 300; ++i)
      c->put(EntryKind::Stage, hex_key(i, 'e'), hex_key(i), "parent", 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(warnings_.empty()) << warnings_.front();
  auto c = open(options());
  EXPECT_EQ(stats(*c).entries(), 600);
  EXPECT_EQ(c->get(EntryKind::Stage, hex_key(7, 'c'), hex_key(7)), "child");
  EXPECT_EQ(c->get(EntryKind::Stage, hex_key(7, 'e'), hex_key(7)), "parent");
}

TEST(CacheRecord, DamageIsDetected) {
  Record r;
  r.digest = *parse_hash128(hex_key(5));
  r.payload = "payload bytes";
  const MacKey key{};
  const std::string entry = "\x01" + std::string(16, 'k');
  std::string bytes = encode_record(r, key, entry);
  ASSERT_TRUE(decode_record(bytes, key, entry));
  EXPECT_EQ(decode_record(bytes, key, entry)->payload, "payload bytes");
  // The MAC covers every byte, the time and solve seconds included.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= 0x01;
    EXPECT_FALSE(decode_record(damaged, key, entry)) << "flipped byte " << i;
  }
  EXPECT_FALSE(decode_record(bytes.substr(0, bytes.size() - 1), key, entry));
}

TEST(CacheUnits, SizesAndDurations) {
  EXPECT_EQ(parse_size("512"), 512u);
  EXPECT_EQ(parse_size("64K"), 64u << 10);
  EXPECT_EQ(parse_size("2g"), uint64_t{2} << 30);
  EXPECT_EQ(parse_size("1MiB"), 1u << 20);
  EXPECT_FALSE(parse_size("M"));
  EXPECT_FALSE(parse_size("12X"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_EQ(parse_duration_seconds("90"), 90);
  EXPECT_EQ(parse_duration_seconds("15m"), 900);
  EXPECT_EQ(parse_duration_seconds("30d"), 30 * 86400);
  EXPECT_FALSE(parse_duration_seconds("soon"));
}

}  // namespace
}  // namespace shardproof::cache
