#include "daemon/line_splitter.h"

#include <algorithm>
#include <cstring>

#include "engine/format/large_text.h"

namespace shardproof::daemon {

bool LineSplitter::expect_payload(size_t size) {
  if (size == 0 || size > limit_) return false;
  payload_wanted_ = size;
  // Only address space until the bytes arrive: a client that announces a
  // large payload and stalls costs what it sent.
  reserve_large(payload_, size);
  return true;
}

bool LineSplitter::feed(const char* data, size_t size, const Sink& on_line,
                        const Sink& on_payload) {
  while (size > 0) {
    if (payload_wanted_ > 0) {
      size_t take = std::min(size, payload_wanted_);
      payload_.append(data, take);
      payload_wanted_ -= take;
      data += take;
      size -= take;
      if (payload_wanted_ > 0) return true;
      std::string payload;
      payload.swap(payload_);
      if (on_payload) on_payload(std::move(payload));
      continue;
    }
    const char* newline = static_cast<const char*>(std::memchr(data, '\n', size));
    size_t take = newline ? static_cast<size_t>(newline - data) : size;
    if (partial_.size() + take > limit_) {
      partial_.clear();
      return false;
    }
    partial_.append(data, take);
    if (!newline) return true;
    std::string line;
    line.swap(partial_);
    on_line(std::move(line));
    data += take + 1;
    size -= take + 1;
  }
  return true;
}

}  // namespace shardproof::daemon
