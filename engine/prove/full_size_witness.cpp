#include "engine/prove/full_size_witness.h"

#include <algorithm>

#include "engine/prove/stage_testing.h"
#include "engine/stage/narrowed_stage.h"

namespace shardproof {
namespace {

std::string index_string(const std::vector<int64_t>& index) {
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d) s += (d ? ", " : "") + std::to_string(index[d]);
  return s + "]";
}

std::vector<int64_t> lifted(std::vector<int64_t> e, const std::vector<int64_t>& origin) {
  for (size_t d = 0; d < e.size() && d < origin.size(); ++d) e[d] += origin[d];
  return e;
}

// Integer inputs of the narrowed stage range over the longest line it holds
// (not only 0 and 1), so that the values next to its constants, such as a
// vocabulary shard's bounds, are tried: any value is an input the contract
// allows, and one out of range for an op leaves the domain (a skipped trial).
void widen_integer_inputs(Stage& s) {
  int64_t longest = 2;
  for (const StageTensor& t : s.tensors)
    for (int64_t n : t.shape) longest = std::max(longest, n);
  s.value_maps.assign(s.tensors.size(), std::nullopt);
  for (size_t t = 0; t < s.tensors.size(); ++t)
    if (s.tensors[t].free && dclass_of(s.tensors[t].dtype) == DClass::Int)
      s.value_maps[t] = ValueMap{{0, longest}, {0, longest}, 0, 0};
}

}  // namespace

std::optional<Finding> full_size_witness(const Stage& full, const Finding& reduced,
                                         const WitnessBudget& budget, std::string& why) {
  why = "the finding names no element";
  for (size_t i = 0; i < reduced.elements.size() && i < static_cast<size_t>(budget.elements_tried);
       ++i) {
    const std::vector<int64_t>& element = reduced.elements[i];
    std::string narrowing;
    std::optional<NarrowedStage> n =
        narrow_stage(full, element, budget.narrowed_elements, narrowing);
    if (n) widen_integer_inputs(n->stage);
    if (!n) {
      why = "element " + index_string(element) + " cannot be narrowed: " + narrowing;
      continue;
    }
    const int64_t size = n->stage.element_count();
    const std::optional<Finding> f =
        refute_by_testing(n->stage, budget.trials, /*aim_at_constants=*/true);
    if (!f) {
      why = "random values at full size on the " + std::to_string(size) + " elements that " +
            index_string(element) + " needs agree";
      continue;
    }
    Finding out = reduced;
    out.elements.clear();
    for (const std::vector<int64_t>& e : f->elements) out.elements.push_back(lifted(e, n->origin));
    nlohmann::json differences = f->counterexample.value("differences", nlohmann::json::array());
    for (nlohmann::json& d : differences)
      d["element"] = lifted(d["element"].get<std::vector<int64_t>>(), n->origin);
    out.counterexample["full_size"] = {
        {"sub_stage_elements", size},
        {"differences", differences},
        {"functions", f->counterexample.value("functions", nlohmann::json::array())}};
    out.message += "; replayed at full size: " +
                   (f->parallel_tensors.empty() ? std::string("a claim") : f->parallel_tensors[0]) +
                   " differs at " + index_string(out.elements.front()) + " (random values on the " +
                   std::to_string(size) + " elements of the stage that element needs)";
    return out;
  }
  return std::nullopt;
}

}  // namespace shardproof
