// The files a plan is read from: a file's whole text, and where a graph
// reference ("parallel": "graphs/p.json") points. The parser, the CLI (which
// inlines references before sending a plan to the daemon) and the report
// writers (which locate findings in the plan's text) all read through here,
// so the limits below hold for every read: a plan names files, and a plan
// may come from anyone (docs/security.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace shardproof {

// The largest file read: $SHARDPROOF_MAX_FILE_BYTES ("2G"), else 1 GiB.
uint64_t max_file_bytes();

// The whole file, read at once into a string of its size (plans run to tens
// of megabytes); streams what has no size (a pipe). nullopt with `error`
// ("cannot read PATH: why") when it cannot be read, is a directory or a
// device (/dev/zero), or holds more than max_file_bytes().
std::optional<std::string> read_file_text(const std::string& path, std::string* error = nullptr);

// A graph reference resolved as the format says: relative to the plan's
// directory `base_dir` (an absolute reference, or an empty base, as it is).
std::string resolve_graph_path(const std::string& base_dir, const std::string& reference);

// resolve_graph_path, confined: the file (symlinks followed) must lie in
// the plan's directory tree, or under $SHARDPROOF_GRAPH_ROOT when that is
// set. nullopt with `why` for a reference that leaves it ("../../etc/passwd").
std::optional<std::string> graph_file_path(const std::string& base_dir,
                                           const std::string& reference, std::string* why);

}  // namespace shardproof
