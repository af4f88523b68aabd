// Cuts a byte stream into newline-terminated frames, refusing any frame
// longer than the limit before it is buffered in full (a client cannot make
// the daemon hold more than `limit` bytes of one unfinished line).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace shardproof::daemon {

class LineSplitter {
 public:
  explicit LineSplitter(size_t limit) : limit_(limit) {}

  // Calls on_line for each complete line (without its "\n"; a trailing "\r"
  // is kept). False once a frame exceeds the limit: the stream cannot be
  // resynchronised and should be dropped.
  bool feed(const char* data, size_t size, const std::function<void(std::string&&)>& on_line);

  // Bytes of an unfinished line held so far.
  size_t pending() const { return partial_.size(); }

 private:
  size_t limit_;
  std::string partial_;
};

}  // namespace shardproof::daemon
