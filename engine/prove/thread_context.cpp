#include "engine/prove/thread_context.h"

namespace shardproof {
namespace {

// Leases before the context is replaced (symbols are interned for good).
constexpr int kLeasesPerContext = 256;

}  // namespace

std::shared_ptr<z3::context> lease_thread_context() {
  thread_local std::shared_ptr<z3::context> cached;
  thread_local int leases = 0;
  // Held by a caller further up (a solve inside a solve): a context of its own.
  if (cached && cached.use_count() > 1) return std::make_shared<z3::context>();
  if (!cached || ++leases > kLeasesPerContext) {
    cached.reset();  // before the new one: one context alive at a time
    cached = std::make_shared<z3::context>();
    leases = 1;
  }
  return cached;
}

}  // namespace shardproof
