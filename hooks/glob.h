// The glob patterns of .shardproof.json, matched against repository paths
// ("configs/llama/8b.yaml", always with '/', relative to the repository root).
#pragma once

#include <string_view>

namespace shardproof::hooks {

// '*', '?' and '[...]' match within one path segment (never a '/'); a
// segment that is exactly "**" matches any number of segments, none
// included: "configs/**/*.yaml" matches "configs/a.yaml" and
// "configs/x/y/a.yaml". The pattern must match the whole path.
bool glob_match(std::string_view pattern, std::string_view path);

}  // namespace shardproof::hooks
