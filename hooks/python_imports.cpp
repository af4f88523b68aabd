#include "hooks/python_imports.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

namespace shardproof::hooks {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

std::string strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && (is_space(s[b]) || s[b] == '\r')) ++b;
  while (e > b && (is_space(s[e - 1]) || s[e - 1] == '\r')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      out.push_back(strip(s.substr(start, i - start)));
      start = i + 1;
    }
  return out;
}

// "a.b as c" -> "a.b"
std::string without_alias(const std::string& item) {
  std::string s = strip(item);
  for (size_t i = 0; i + 4 <= s.size(); ++i)
    if (is_space(s[i]) && s.compare(i + 1, 3, "as ") == 0) return strip(s.substr(0, i));
  return s;
}

bool starts_with_word(const std::string& s, const char* word) {
  const std::string w(word);
  return s.compare(0, w.size(), w) == 0 && s.size() > w.size() &&
         (is_space(s[w.size()]) || s[w.size()] == '.' || s[w.size()] == '(');
}

// Logical lines: comments dropped, bracket and backslash continuations
// joined, `;`-separated statements split.
std::vector<std::string> statements(const std::string& source) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    // A triple-quoted string (a docstring) is skipped whole: its brackets
    // and words are not code.
    if (!quote && (c == '"' || c == '\'') && source.compare(i, 3, std::string(3, c)) == 0) {
      const size_t end = source.find(std::string(3, c), i + 3);
      if (end == std::string::npos) break;
      current += "\"\"";
      i = end + 2;
      continue;
    }
    if (quote) {
      current += c;
      if (c == '\\' && i + 1 < source.size())
        current += source[++i];
      else if (c == quote)
        quote = 0;
      else if (c == '\n')
        quote = 0;  // an unterminated string ends with its line
      continue;
    }
    if (c == '#') {
      while (i + 1 < source.size() && source[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '\'' || c == '"') quote = c;
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (c == '\\' && i + 1 < source.size() && source[i + 1] == '\n') {
      ++i;
      current += ' ';
      continue;
    }
    if ((c == '\n' && depth == 0) || c == ';') {
      out.push_back(strip(current));
      current.clear();
      if (c == '\n') depth = 0;
      continue;
    }
    current += c == '\n' ? ' ' : c;
  }
  out.push_back(strip(current));
  return out;
}

std::string join_path(const std::string& dir, const std::string& rel) {
  return dir.empty() ? rel : dir + "/" + rel;
}

std::string dotted_to_path(const std::string& dotted) {
  std::string p = dotted;
  for (char& c : p)
    if (c == '.') c = '/';
  return p;
}

}  // namespace

std::vector<PythonImport> scan_python_imports(const std::string& source) {
  std::vector<PythonImport> out;
  for (const std::string& s : statements(source)) {
    if (starts_with_word(s, "import")) {
      for (const std::string& item : split(s.substr(6), ',')) {
        PythonImport imp;
        imp.module = without_alias(item);
        if (!imp.module.empty()) out.push_back(imp);
      }
    } else if (starts_with_word(s, "from")) {
      size_t at = s.find(" import");
      if (at == std::string::npos) continue;
      std::string module = strip(s.substr(4, at - 4));
      PythonImport imp;
      while (!module.empty() && module[0] == '.') ++imp.level, module.erase(0, 1);
      imp.module = strip(module);
      std::string names = strip(s.substr(at + 7));
      if (!names.empty() && names.front() == '(') names.erase(0, 1);
      if (!names.empty() && names.back() == ')') names.pop_back();
      for (const std::string& n : split(names, ','))
        if (!without_alias(n).empty()) imp.names.push_back(without_alias(n));
      out.push_back(imp);
    }
  }
  return out;
}

// `dir` and each directory above it, the repository root ("") last.
static std::vector<std::string> dir_and_above(const std::string& dir) {
  std::vector<std::string> out;
  for (std::filesystem::path p(dir); !p.empty(); p = p.parent_path()) out.push_back(p.string());
  out.push_back("");
  return out;
}

std::vector<std::string> sys_path_dirs(const std::string& source, const std::string& importer) {
  std::vector<std::string> out;
  std::istringstream lines(source);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("sys.path") == std::string::npos) continue;
    for (size_t at = 0; (at = line.find_first_of("\"'", at)) != std::string::npos;) {
      const size_t end = line.find(line[at], at + 1);
      if (end == std::string::npos) break;
      const std::string name = line.substr(at + 1, end - at - 1);
      at = end + 1;
      const bool plain = !name.empty() && name != "." &&
                         name.find_first_not_of(
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789_-./") == std::string::npos &&
                         name.find("..") == std::string::npos && name.front() != '/';
      if (!plain) continue;
      for (const std::string& base :
           dir_and_above(std::filesystem::path(importer).parent_path().string()))
        out.push_back(join_path(base, name));
    }
  }
  return out;
}

std::vector<std::string> import_candidates(const PythonImport& import, const std::string& importer,
                                           const std::string& harness_dir,
                                           const std::vector<std::string>& path_dirs) {
  std::vector<std::string> bases;
  if (import.level > 0) {
    std::filesystem::path base = std::filesystem::path(importer).parent_path();
    for (int up = 1; up < import.level; ++up) base = base.parent_path();
    bases.push_back(base.string());
  } else {
    // The harness's directory is first on sys.path; the directories above it
    // stand for the parents a harness inserts (and the repository root, the
    // front end's working directory).
    bases = dir_and_above(harness_dir);
    bases.insert(bases.end(), path_dirs.begin(), path_dirs.end());
  }
  std::vector<std::string> out;
  for (const std::string& base : bases) {
    // Each package on the way, then the module itself.
    std::string prefix;
    if (!import.module.empty()) {
      for (const std::string& part : split(import.module, '.')) {
        prefix = prefix.empty() ? part : prefix + "/" + part;
        out.push_back(join_path(base, prefix + ".py"));
        out.push_back(join_path(base, prefix + "/__init__.py"));
      }
    } else {
      out.push_back(join_path(base, "__init__.py"));
    }
    for (const std::string& name : import.names) {
      if (name == "*" || name.empty()) continue;
      const std::string sub =
          join_path(prefix.empty() ? base : join_path(base, prefix), dotted_to_path(name));
      out.push_back(sub + ".py");
      out.push_back(sub + "/__init__.py");
    }
  }
  return out;
}

std::vector<std::string> harness_dependencies(const std::string& harness, TreeReader& tree,
                                              size_t limit) {
  const std::string harness_dir = std::filesystem::path(harness).parent_path().string();
  std::set<std::string> found{harness}, asked{harness};
  std::vector<std::string> path_dirs;  // what the files seen so far add to sys.path
  std::vector<std::pair<std::string, std::string>> pending;  // path, text
  for (auto& [path, text] : tree.read({harness}))
    if (text) pending.push_back({path, *text});
  while (!pending.empty() && found.size() < limit) {
    std::vector<std::string> next;
    for (const auto& [path, text] : pending)
      for (std::string& d : sys_path_dirs(text, path))
        if (std::find(path_dirs.begin(), path_dirs.end(), d) == path_dirs.end())
          path_dirs.push_back(std::move(d));
    for (const auto& [path, text] : pending)
      for (const PythonImport& imp : scan_python_imports(text))
        for (std::string& c : import_candidates(imp, path, harness_dir, path_dirs))
          if (c.rfind("../", 0) != 0 && asked.insert(c).second) next.push_back(std::move(c));
    pending.clear();
    if (next.empty()) break;
    for (auto& [path, text] : tree.read(next)) {
      if (!text || found.size() >= limit) continue;
      found.insert(path);
      pending.push_back({path, *text});
    }
  }
  return {found.begin(), found.end()};
}

}  // namespace shardproof::hooks
