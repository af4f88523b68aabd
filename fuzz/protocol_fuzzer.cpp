// libFuzzer: the daemon's framing on any byte stream, cut into pieces as a
// socket would deliver them, with every frame parsed as the server parses
// it (payload announcements followed, verify requests read).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "daemon/line_splitter.h"
#include "daemon/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // The first byte sets the piece size, the rest is the stream.
  const size_t piece = 1 + data[0] % 64;
  const char* bytes = reinterpret_cast<const char*>(data + 1);
  size -= 1;
  shardproof::daemon::LineSplitter splitter(4096);
  auto on_line = [&](std::string&& line) {
    nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (m.is_discarded()) return;
    uint64_t length = 0;
    std::string why;
    if (shardproof::daemon::payload_length(m, &length, &why) && length > 0)
      splitter.expect_payload(length);
    shardproof::daemon::parse_verify_request(m, &why);
    shardproof::daemon::to_frame(m);
  };
  auto on_payload = [](std::string&&) {};
  for (size_t at = 0; at < size; at += piece) {
    size_t n = std::min(piece, size - at);
    if (!splitter.feed(bytes + at, n, on_line, on_payload)) break;
  }
  return 0;
}
