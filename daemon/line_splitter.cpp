#include "daemon/line_splitter.h"

#include <cstring>

namespace shardproof::daemon {

bool LineSplitter::feed(const char* data, size_t size,
                        const std::function<void(std::string&&)>& on_line) {
  while (size > 0) {
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
