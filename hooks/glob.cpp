#include "hooks/glob.h"

#include <fnmatch.h>

#include <string>
#include <vector>

namespace shardproof::hooks {
namespace {

std::vector<std::string> segments(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t slash = s.find('/', start);
    out.emplace_back(s.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) return out;
    start = slash + 1;
  }
}

bool match(const std::vector<std::string>& pattern, size_t p, const std::vector<std::string>& path,
           size_t i) {
  while (p < pattern.size()) {
    if (pattern[p] == "**") {
      // Collapse "**/**", then try every split point.
      while (p + 1 < pattern.size() && pattern[p + 1] == "**") ++p;
      for (size_t k = i; k <= path.size(); ++k)
        if (match(pattern, p + 1, path, k)) return true;
      return false;
    }
    if (i >= path.size() || fnmatch(pattern[p].c_str(), path[i].c_str(), 0) != 0) return false;
    ++p;
    ++i;
  }
  return i == path.size();
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view path) {
  return match(segments(pattern), 0, segments(path), 0);
}

}  // namespace shardproof::hooks
