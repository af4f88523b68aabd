#include "daemon/request_table.h"

namespace shardproof::daemon {

void RequestTable::Entry::set_phase(const std::string& phase) {
  std::lock_guard<std::mutex> lock(table_.mutex_);
  row_->phase = phase;
}

void RequestTable::Entry::set_progress(int64_t done, int64_t total) {
  std::lock_guard<std::mutex> lock(table_.mutex_);
  row_->done = done;
  row_->total = total;
}

std::unique_ptr<RequestTable::Entry> RequestTable::add(const std::string& plan) {
  auto row = std::make_shared<Row>();
  row->plan = plan;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id = next_id_++;
  rows_[id] = row;
  return std::make_unique<Entry>(*this, id, std::move(row));
}

int RequestTable::cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  int n = 0;
  for (auto& [rid, row] : rows_) {
    if (id != 0 && rid != id) continue;
    if (!row->cancelled.exchange(true)) ++n;
  }
  return n;
}

nlohmann::json RequestTable::to_json() const {
  auto now = std::chrono::steady_clock::now();
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, row] : rows_) {
    out.push_back({{"id", id},
                   {"plan", row->plan},
                   {"phase", row->cancelled ? "cancelling" : row->phase},
                   {"done", row->done},
                   {"total", row->total},
                   {"seconds", std::chrono::duration<double>(now - row->started).count()}});
  }
  return out;
}

void RequestTable::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.erase(id);
}

}  // namespace shardproof::daemon
