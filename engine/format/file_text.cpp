#include "engine/format/file_text.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/core/units.h"
#include "engine/format/large_text.h"

namespace shardproof {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kDefaultMaxFileBytes = uint64_t{1} << 30;

std::nullopt_t fail(std::string* error, const std::string& path, const std::string& why) {
  if (error) *error = "cannot read " + path + ": " + why;
  return std::nullopt;
}

std::string describe_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "it is a directory";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "it is a device, not a file";
  if (S_ISSOCK(mode)) return "it is a socket, not a file";
  return "";
}

// Component by component: "/a/bc" is not inside "/a/b".
bool inside(const fs::path& file, const fs::path& root) {
  auto f = file.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++f) {
    if (r->empty()) continue;  // a trailing separator
    if (f == file.end() || *f != *r) return false;
  }
  return true;
}

}  // namespace

uint64_t max_file_bytes() {
  // Malformed or 0: the default (the CLI warns about a malformed value).
  const char* env = std::getenv("SHARDPROOF_MAX_FILE_BYTES");
  std::optional<uint64_t> limit = env ? parse_size(env) : std::nullopt;
  return limit && *limit > 0 ? *limit : kDefaultMaxFileBytes;
}

std::optional<std::string> read_file_text(const std::string& path, std::string* error) {
  // Opened without blocking: a FIFO nobody writes must not hang the open
  // (reads then wait for data as usual).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(error, path, std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return fail(error, path, std::strerror(e));
  }
  if (std::string kind = describe_kind(st.st_mode); !kind.empty()) {
    ::close(fd);
    return fail(error, path, kind);
  }
  // A pipe keeps its non-blocking descriptor: closing it to reopen blocking
  // would drop what a writer already wrote (and then wait for a writer that
  // has gone). Reads poll instead; anything else reads blocking.
  const bool pipe = S_ISFIFO(st.st_mode);
  if (!pipe) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const uint64_t limit = max_file_bytes();
  auto too_large = [&] {
    ::close(fd);
    return fail(error, path,
                "it holds more than " + std::to_string(limit) +
                    " bytes (the limit; set SHARDPROOF_MAX_FILE_BYTES to raise it)");
  };
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit) return too_large();
  // The size is only a hint (a pipe has none, a file may grow): the loop
  // reads to the end either way, never beyond the limit.
  std::string text;
  if (S_ISREG(st.st_mode)) reserve_large(text, static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    if (pipe) {
      // Before its first writer, a FIFO reads as ended; Linux reports no
      // hang-up until a writer has come and gone, so this waits for data or
      // the writer's end as a blocking open would have.
      struct pollfd ready = {fd, POLLIN, 0};
      if (::poll(&ready, 1, -1) < 0 && errno != EINTR) break;
    }
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return fail(error, path, std::string("read failed: ") + std::strerror(e));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > limit) return too_large();
    text.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::string resolve_graph_path(const std::string& base_dir, const std::string& reference) {
  fs::path path = fs::path(reference).is_absolute() || base_dir.empty()
                      ? fs::path(reference)
                      : fs::path(base_dir) / reference;
  return path.lexically_normal().string();
}

std::optional<std::string> graph_file_path(const std::string& base_dir,
                                           const std::string& reference, std::string* why) {
  std::string resolved = resolve_graph_path(base_dir, reference);
  const char* env = std::getenv("SHARDPROOF_GRAPH_ROOT");
  std::string root = env && *env ? env : (base_dir.empty() ? "." : base_dir);
  std::error_code ec;
  fs::path real_root = fs::weakly_canonical(fs::absolute(root, ec), ec);
  fs::path real_file = ec ? fs::path() : fs::weakly_canonical(fs::absolute(resolved, ec), ec);
  struct stat st;
  if (!ec && stat(real_file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    *why = "graph file \"" + reference + "\" is not a regular file";
    return std::nullopt;
  }
  if (ec || !inside(real_file, real_root)) {
    *why = "graph file \"" + reference + "\" lies outside " +
           (env && *env ? "$SHARDPROOF_GRAPH_ROOT " + real_root.string()
                        : "the plan's directory " + real_root.string()) +
           " (set SHARDPROOF_GRAPH_ROOT to a directory that holds both to allow it)";
    return std::nullopt;
  }
  return resolved;
}

}  // namespace shardproof
