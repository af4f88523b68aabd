// A store of definite stage verdicts in a map, kept across the runs of one
// test as the LMDB cache keeps them across verifications.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "engine/decide/stage_store.h"

namespace shardproof::testing {

class MapStore : public StageVerdictStore {
 public:
  std::optional<std::string> lookup(const StageIdentity& id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.find(id.key + id.digest);
    if (it == kept_.end()) return std::nullopt;
    return it->second;
  }
  void finish(const StageIdentity& id, const std::optional<std::string>& outcome, double) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (outcome) kept_[id.key + id.digest] = *outcome;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, std::string> kept_;
};

}  // namespace shardproof::testing
