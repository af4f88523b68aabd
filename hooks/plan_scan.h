// What the hooks need to know of a JSON file without validating it: is it
// a plan, and which graph files does it reference.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof::hooks {

// "shardproof-plan/1" and its minor versions ("shardproof-plan/1.1").
bool is_plan_format(std::string_view format);

struct PlanHeader {
  bool is_plan = false;                 // a top-level "format" that is_plan_format
  std::vector<std::string> graph_refs;  // top-level "logical"/"parallel" strings
};

// Streams the text once, looking only at top-level keys. A file that is
// not valid JSON is still a plan when its "format" came before the error
// (verify then says what is wrong with it).
PlanHeader scan_plan_header(const std::string& text);

// The repository path of a graph file `ref` that the plan at repository
// path `plan` names (relative to the plan's directory, as the engine
// resolves it); nullopt when it is absolute or outside the repository.
std::optional<std::string> resolve_graph_ref(const std::string& plan, const std::string& ref);

}  // namespace shardproof::hooks
