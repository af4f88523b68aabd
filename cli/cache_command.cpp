// `shardproof cache stats|gc|clear`: the verdict cache, opened in this
// process (safe while a daemon uses it: LMDB locks across processes).
#include <cstdio>
#include <filesystem>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/harness.h"
#include "cli/local_cache.h"
#include "cli/settings.h"
#include "engine/core/units.h"

namespace shardproof::cli {
namespace {

int fail(const std::string& message, int code = kExitInternal) {
  std::cerr << "shardproof cache: " << message << "\n";
  return code;
}

double mean_ms(uint64_t total_us, uint64_t count) {
  return count == 0 ? 0.0 : static_cast<double>(total_us) / 1000.0 / static_cast<double>(count);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  return buf;
}

// The remote tier's counters, and whether it answers now.
struct RemoteView {
  bool reachable = false;
  long long keys = 0;
  double ping_ms = 0;
  std::string why;
};

nlohmann::ordered_json remote_json(const cache::CacheStats& s, const RemoteView& v) {
  const cache::RemoteCounters& r = s.remote;
  nlohmann::ordered_json out = {{"url", s.remote_url},
                                {"mode", s.remote_writable ? "read-write" : "read-only"},
                                {"reachable", v.reachable}};
  if (v.reachable) {
    out["keys"] = v.keys;
    out["ping_ms"] = v.ping_ms;
  } else {
    out["error"] = v.why;
  }
  out.update({{"hits", r.hits},
              {"misses", r.misses},
              {"rejected", r.rejected},
              {"errors", r.errors},
              {"writes", r.writes},
              {"requests", r.requests},
              {"mean_latency_ms", mean_ms(r.latency_us, r.requests)}});
  return out;
}

int stats(cache::VerdictCache& c, const CacheArgs& args) {
  cache::CacheStats s;
  if (Status st = c.stats(&s); !st.ok()) return fail(st.message());
  RemoteView view;
  if (c.remote()) view.reachable = c.remote()->probe(&view.keys, &view.ping_ms, &view.why);
  const double lookup_ms = mean_ms(s.lookup_us, s.hits + s.misses);
  if (args.format == "json") {
    nlohmann::ordered_json out = {{"path", s.path},
                                  {"entries", s.entries()},
                                  {"stage_entries", s.stage_entries},
                                  {"plan_entries", s.plan_entries},
                                  {"bytes", s.bytes},
                                  {"file_bytes", s.file_bytes},
                                  {"max_bytes", s.max_bytes},
                                  {"hits", s.hits},
                                  {"misses", s.misses},
                                  {"hit_rate", s.hit_rate()},
                                  {"errors", s.errors},
                                  {"mean_lookup_ms", lookup_ms}};
    out["remote"] = c.remote() ? remote_json(s, view) : nlohmann::ordered_json(nullptr);
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  char rate[16];
  std::snprintf(rate, sizeof rate, "%.1f%%", 100 * s.hit_rate());
  std::cout << "cache: " << s.path << "\n"
            << "entries: " << s.entries() << " (" << s.stage_entries << " stages, "
            << s.plan_entries << " plans)\n"
            << "size: " << format_bytes(s.bytes) << " of " << format_bytes(s.max_bytes) << " (file "
            << format_bytes(s.file_bytes) << ")\n"
            << "lookups: " << s.hits << " hits, " << s.misses << " misses (hit rate " << rate
            << "), " << s.errors << " errors, mean " << ms_text(lookup_ms) << "\n";
  if (!c.remote()) {
    std::cout << "remote: none (SHARDPROOF_REMOTE_CACHE)\n";
    return kExitOk;
  }
  const cache::RemoteCounters& r = s.remote;
  std::cout << "remote: " << s.remote_url << " ("
            << (s.remote_writable ? "read-write" : "read-only") << "), ";
  if (view.reachable)
    std::cout << view.keys << " keys, answers in " << ms_text(view.ping_ms) << "\n";
  else
    std::cout << "not reachable: " << view.why << "\n";
  std::cout << "remote lookups: " << r.hits << " hits, " << r.misses << " misses, " << r.rejected
            << " rejected (failed authentication), " << r.errors << " errors, " << r.writes
            << " writes, mean " << ms_text(mean_ms(r.latency_us, r.requests)) << "\n";
  return kExitOk;
}

int gc(cache::VerdictCache& c, const CacheArgs& args) {
  std::optional<uint64_t> max_size = c.max_bytes();
  if (!args.max_size.empty() && !(max_size = parse_size(args.max_size)))
    return fail("--max-size: expected a size such as 512M or 2G", kExitUsage);
  std::optional<int64_t> max_age;
  if (!args.max_age.empty() && !(max_age = parse_duration_seconds(args.max_age)))
    return fail("--max-age: expected a duration such as 12h or 30d", kExitUsage);
  cache::GcResult r;
  if (Status st = c.gc(max_size, max_age, &r); !st.ok()) return fail(st.message());
  std::cout << "removed " << r.removed << " entries (" << format_bytes(r.removed_bytes)
            << "), kept " << r.kept << " (" << format_bytes(r.kept_bytes) << ")\n";
  return kExitOk;
}

}  // namespace

CLI::App* add_cache_command(CLI::App& app, CacheArgs& args) {
  CLI::App* cmd = app.add_subcommand("cache", "Inspect or trim the cache of proven stages");
  cmd->require_subcommand(1);
  // One subcommand per action, each with only its own options.
  auto action = [&](const char* name, const char* what) {
    CLI::App* sub = cmd->add_subcommand(name, what);
    sub->callback([&args, name] { args.action = name; });
    return sub;
  };
  action("stats", "Show the cache's size, entries and hit rate")
      ->add_option("--format", args.format, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  CLI::App* gc = action("gc", "Evict old entries down to a size or age");
  gc->add_option("--max-size", args.max_size,
                 "Evict the least recently used entries down to this size (default: the "
                 "cap, $SHARDPROOF_CACHE_MAX_SIZE or 1G)");
  gc->add_option("--max-age", args.max_age, "Remove entries unused for this long (e.g. 30d)");
  action("clear", "Remove every entry");
  return cmd;
}

int run_cache_command(const CacheArgs& args) {
  resolve_and_export_local_settings({});  // the remote tier `stats` shows
  Status status;
  std::unique_ptr<cache::VerdictCache> c = open_local_cache(&status);
  if (!c) return fail(status.message());
  if (args.action == "stats") return stats(*c, args);
  if (args.action == "gc") return gc(*c, args);
  if (Status st = c->clear(); !st.ok()) return fail(st.message());
  std::cout << "cleared " << c->path() << "\n";
  // The kept captures of harnesses (cli/harness.h) go with the verdicts.
  if (const std::string captures = captures_dir(); !captures.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(captures, ec);
    if (ec) return fail("cannot remove " + captures + ": " + ec.message());
  }
  return kExitOk;
}

}  // namespace shardproof::cli
