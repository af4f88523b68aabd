// In-flight deduplication: when a stage key is already being solved (for
// another plan, another client, or another layer of this plan solved by a
// concurrent request), a second lookup waits for that answer instead of
// solving the same stage again. Wraps the cache's store (or none).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/decide/stage_store.h"

namespace shardproof::daemon {

class InflightStore : public StageVerdictStore {
 public:
  explicit InflightStore(StageVerdictStore* inner) : inner_(inner) {}

  std::optional<std::string> lookup(const StageIdentity& id) override;
  void finish(const StageIdentity& id, const std::optional<std::string>& outcome,
              double solve_seconds) override;

  // Lookups answered by another caller's solve (for `status`).
  int64_t joined() const;
  int64_t in_flight() const;

 private:
  struct Solve {
    bool done = false;
    std::optional<std::string> outcome;
  };

  StageVerdictStore* inner_;
  mutable std::mutex mutex_;
  std::condition_variable finished_;
  std::map<std::string, std::shared_ptr<Solve>> solving_;  // by stage key
  int64_t joined_ = 0;
};

}  // namespace shardproof::daemon
