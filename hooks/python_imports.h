// Which local Python files a torch harness depends on, so the hooks run it
// when any of them changes: the `import` statements of the harness and,
// transitively, of every local file it imports, resolved as Python would
// from the harness's directory (first on sys.path, docs/torch-harness.md)
// and from the repository root (the front end's working directory). A scan
// of the text, not Python: an import inside a string may count too, which
// only runs the harness once more than needed.
#pragma once

#include <string>
#include <vector>

#include "hooks/selection.h"

namespace shardproof::hooks {

// One import statement: `import a.b` (module "a.b"), `from .m import x, y`
// (level 1, module "m", names x and y).
struct PythonImport {
  int level = 0;                   // leading dots of a relative import
  std::string module;              // dotted; may be empty (`from . import x`)
  std::vector<std::string> names;  // `from ... import` names ("*" included)
};

std::vector<PythonImport> scan_python_imports(const std::string& source);

// The repository paths that `import` may load, when `importer` (a
// repository path) holds it and `harness_dir` is the harness's directory
// ("" at the root): modules, their packages' __init__.py, and the names a
// `from` import may take as submodules. An absolute import is looked up in
// the harness's directory, each directory above it up to the repository
// root (a harness that puts its parent on sys.path, as the examples do, or
// a src layout), and `path_dirs` (directories a file adds to sys.path).
std::vector<std::string> import_candidates(const PythonImport& import, const std::string& importer,
                                           const std::string& harness_dir,
                                           const std::vector<std::string>& path_dirs = {});

// The directories a file of `importer`'s may add to sys.path, over-
// approximated from its text: for each string literal on a line that
// mentions sys.path and names a directory (`"lib"`, `"src"`), that name
// under the importer's directory and under each directory above it.
std::vector<std::string> sys_path_dirs(const std::string& source, const std::string& importer);

// The harness and every local file it imports, transitively, as present in
// `tree` (sorted). Stops after `limit` files.
std::vector<std::string> harness_dependencies(const std::string& harness, TreeReader& tree,
                                              size_t limit = 2000);

}  // namespace shardproof::hooks
