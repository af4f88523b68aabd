// The files a plan is read from: a file's whole text, and where a graph
// reference ("parallel": "graphs/p.json") points. The parser, the CLI (which
// inlines references before sending a plan to the daemon) and the report
// writers (which locate findings in the plan's text) all read through here.
#pragma once

#include <optional>
#include <string>

namespace shardproof {

// The whole file, read at once into a string of its size (plans run to tens
// of megabytes); streams what has no size (a pipe). nullopt with `error`
// ("cannot read PATH: why") when it cannot be read or is a directory.
std::optional<std::string> read_file_text(const std::string& path, std::string* error = nullptr);

// A graph reference resolved as the format says: relative to the plan's
// directory `base_dir` (an absolute reference, or an empty base, as it is).
std::string resolve_graph_path(const std::string& base_dir, const std::string& reference);

}  // namespace shardproof
