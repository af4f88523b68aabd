// The verify requests a daemon is running, for `daemon status` (plan, phase,
// progress, age) and `daemon cancel` (a flag the request's proofs check).
// Thread-safe: requests update their row from their own threads while the
// loop thread reads the table.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace shardproof::daemon {

class RequestTable {
 public:
  struct Row {
    std::string plan;
    std::string phase = "queued";  // queued (for memory), verifying, done
    int64_t done = 0;
    int64_t total = 0;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    std::atomic<bool> cancelled{false};
  };

  // A row for as long as the entry lives; its number is the request's id in
  // `status` and `cancel`.
  class Entry {
   public:
    Entry(RequestTable& table, uint64_t id, std::shared_ptr<Row> row)
        : table_(table), id_(id), row_(std::move(row)) {}
    ~Entry() { table_.remove(id_); }
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    uint64_t id() const { return id_; }
    bool cancelled() const { return row_->cancelled.load(); }
    void set_phase(const std::string& phase);
    void set_progress(int64_t done, int64_t total);

   private:
    RequestTable& table_;
    uint64_t id_;
    std::shared_ptr<Row> row_;
  };

  std::unique_ptr<Entry> add(const std::string& plan);
  // Cancels request `id`, or every request when `id` is 0; how many were.
  int cancel(uint64_t id);
  // [{"id", "plan", "phase", "done", "total", "seconds"}...], oldest first.
  nlohmann::json to_json() const;

 private:
  void remove(uint64_t id);

  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::shared_ptr<Row>> rows_;
};

}  // namespace shardproof::daemon
