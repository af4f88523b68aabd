#include "engine/format/file_text.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/format/large_text.h"

namespace shardproof {
namespace {

namespace fs = std::filesystem;

std::nullopt_t fail(std::string* error, const std::string& path, const std::string& why) {
  if (error) *error = "cannot read " + path + ": " + why;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> read_file_text(const std::string& path, std::string* error) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return fail(error, path, "it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(error, path, std::strerror(errno));
  // The size is only a hint (a pipe has none, a file may grow): the loop
  // reads to the end either way.
  std::string text;
  if (std::uintmax_t size = fs::file_size(path, ec); !ec) reserve_large(text, size);
  std::vector<char> chunk(1 << 16);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0)
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
  if (in.bad()) return fail(error, path, "read failed");
  return text;
}

std::string resolve_graph_path(const std::string& base_dir, const std::string& reference) {
  fs::path path = fs::path(reference).is_absolute() || base_dir.empty()
                      ? fs::path(reference)
                      : fs::path(base_dir) / reference;
  return path.lexically_normal().string();
}

}  // namespace shardproof
