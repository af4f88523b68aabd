// Cuts a byte stream into newline-terminated frames, refusing any frame
// longer than the limit before it is buffered in full (a client cannot make
// the daemon hold more than `limit` bytes of one unfinished line). A frame
// may announce a raw payload: that many bytes after its newline are not
// lines but the payload, handed over whole (docs/protocol.md).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace shardproof::daemon {

class LineSplitter {
 public:
  using Sink = std::function<void(std::string&&)>;

  explicit LineSplitter(size_t limit) : limit_(limit) {}

  // Calls on_line for each complete line (without its "\n"; a trailing "\r"
  // is kept), and on_payload for each complete payload. False once a frame
  // exceeds the limit: the stream cannot be resynchronised and should be
  // dropped.
  bool feed(const char* data, size_t size, const Sink& on_line, const Sink& on_payload = {});

  // From on_line: the next `size` bytes (1 or more) are a payload. Copied
  // once, into a string reserved to that size. False when `size` exceeds
  // the limit (nothing is expected then).
  bool expect_payload(size_t size);

  // Whether a frame or payload has begun and not ended.
  bool mid_frame() const { return !partial_.empty() || payload_wanted_ > 0; }
  // Bytes of an unfinished line or payload held so far.
  size_t pending() const { return partial_.size() + payload_.size(); }

 private:
  size_t limit_;
  std::string partial_;
  std::string payload_;
  size_t payload_wanted_ = 0;  // bytes of the payload still to come
};

}  // namespace shardproof::daemon
