// libFuzzer: the verdict cache opening any bytes as its store file, then
// reading, counting and writing through it, and the record decoder on any
// bytes. A damaged store must be moved aside (store_probe.h), never crash
// the process; a record must never decode without its MAC.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "cache/record.h"
#include "cache/verdict_cache.h"

namespace {

const std::string& scratch() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sp-fuzz-store-XXXXXX";
    std::string d = mkdtemp(tmpl) ? tmpl : "/tmp/sp-fuzz-store";
    std::filesystem::create_directories(d + "/cache");
    std::filesystem::permissions(d + "/cache", std::filesystem::perms::owner_all);
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardproof::cache;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  MacKey key{};
  decode_record(bytes, key, "k");

  const std::string dir = scratch() + "/cache";
  std::error_code ec;
  for (const char* f :
       {"verdicts.mdb", "verdicts.mdb-lock", "verdicts.mdb.broken", "verdicts.mdb.corrupt"})
    std::filesystem::remove(dir + "/" + f, ec);
  std::ofstream(dir + "/verdicts.mdb", std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(size));
  CacheOptions options;
  options.dir = dir;
  options.key_file = scratch() + "/key";
  options.initial_map_bytes = 1 << 20;
  options.max_bytes = 1 << 20;
  options.warn = [](const std::string&) {};
  shardproof::Status status;
  std::unique_ptr<VerdictCache> cache = VerdictCache::open(options, &status);
  if (!cache) return 0;
  const std::string k(32, 'a'), d(32, 'b');
  cache->get(EntryKind::Stage, k, d);
  cache->put(EntryKind::Stage, k, d, "payload", 0);
  CacheStats stats;
  cache->stats(&stats);
  GcResult gc;
  cache->gc(0, std::nullopt, &gc);
  return 0;
}
