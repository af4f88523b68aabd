// The text of a plan as the daemon receives it: self-contained, with any
// graph file the plan references inlined by the client, so the daemon never
// reads a user's files.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace shardproof {

// Whether the plan's top-level "logical" or "parallel" is a string (a graph
// file reference). False for text that is not JSON at all (the parser will
// say what is wrong with it).
bool has_graph_references(std::string_view text);

// The plan with each referenced graph file's contents in place of its path,
// resolved relative to `base_dir` as the engine resolves it (numbers and
// strings are kept exactly). nullopt with `why` when the plan or a graph file
// cannot be read or parsed; the caller then lets the engine report it.
std::optional<std::string> inline_graph_references(const std::string& text,
                                                   const std::string& base_dir, std::string* why);

}  // namespace shardproof
