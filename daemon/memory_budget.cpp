#include "daemon/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "engine/core/units.h"
#include "engine/format/compact/compact_expand.h"

namespace shardproof::daemon {
namespace {

// Measured (bench/): a parsed and cut v1 plan holds about 30 bytes per byte
// of its text; an expanded op costs about 4 KB.
constexpr uint64_t kBytesPerTextByte = 32;
constexpr uint64_t kBytesPerInstance = 4096;
constexpr uint64_t kBaseline = uint64_t{64} << 20;
constexpr size_t kCompactScanLimit = size_t{16} << 20;  // compact plans are small

// Instances a compact plan declares: devices x micro-batches x templates,
// at most the engine's limit (beyond it the class verifier runs, which does
// not expand). The limit itself when the text cannot be read here.
uint64_t compact_instances(const std::string& text) {
  const uint64_t limit = static_cast<uint64_t>(compact::kMaxInstances);
  nlohmann::json plan = nlohmann::json::parse(text, nullptr, false);
  try {
    const nlohmann::json& parallel = plan.at("parallel");
    const nlohmann::json& mesh = parallel.at("mesh");
    // Saturating: the values are the plan's, not yet checked.
    auto times = [limit](uint64_t a, uint64_t b) {
      return b >= limit ? limit : std::min(limit, a * b);
    };
    uint64_t instances = times(1, std::max<uint64_t>(1, mesh.value("mb", uint64_t{1})));
    for (const nlohmann::json& axis : mesh.at("axes"))
      instances = times(instances, std::max<uint64_t>(1, axis.at(1).get<uint64_t>()));
    uint64_t templates = 0;
    for (const nlohmann::json& program : parallel.at("programs"))
      templates += program.value("tensors", nlohmann::json::array()).size() +
                   program.value("ops", nlohmann::json::array()).size();
    return std::min(limit, instances * std::max<uint64_t>(1, templates));
  } catch (const nlohmann::json::exception&) {
    return limit;
  }
}

}  // namespace

uint64_t MemoryBudget::estimate(const std::string& text) {
  uint64_t cost = kBaseline + kBytesPerTextByte * text.size();
  // A compact plan costs its expansion, whatever its text.
  if (text.size() < kCompactScanLimit && text.find("shardproof-plan/1.1") != std::string::npos)
    cost += kBytesPerInstance * compact_instances(text);
  return cost;
}

uint64_t MemoryBudget::default_bytes() {
  if (const char* env = std::getenv("SHARDPROOF_DAEMON_MEMORY"))
    if (std::optional<uint64_t> bytes = parse_size(env); bytes && *bytes > 0) return *bytes;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return uint64_t{8} << 30;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2;
}

bool MemoryBudget::acquire(uint64_t bytes, const std::atomic<bool>* cancelled) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (cancelled && *cancelled) return false;
    if (holders_ == 0 || reserved_ + bytes <= total_) break;
    freed_.wait_for(lock, std::chrono::milliseconds(200));  // re-checks `cancelled`
  }
  reserved_ += bytes;
  ++holders_;
  return true;
}

void MemoryBudget::release(uint64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reserved_ -= std::min(reserved_, bytes);
    --holders_;
  }
  freed_.notify_all();
}

uint64_t MemoryBudget::reserved() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reserved_;
}

}  // namespace shardproof::daemon
