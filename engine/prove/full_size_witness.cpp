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

// Where a narrowed stage's leaves sit in the full stage: its tensor's
// source and the box's origin.
LeafPlace places_in_narrowed(const NarrowedStage& n) {
  return [&n](const std::string& name) -> std::optional<std::pair<int, std::vector<int64_t>>> {
    const std::optional<std::pair<int, std::vector<int64_t>>> at = places_in(n.stage)(name);
    if (!at || at->first >= static_cast<int>(n.source.size())) return std::nullopt;
    std::vector<int64_t> index = at->second;
    const SliceSpec& box = n.box[at->first];
    for (size_t d = 0; d < index.size() && d < box.size(); ++d) index[d] += box[d].first;
    return std::make_pair(n.source[at->first], index);
  };
}

// The part of `full` that `element` needs; `why` says why there is none.
std::optional<NarrowedStage> narrowed_for(const Stage& full, const std::vector<int64_t>& element,
                                          const WitnessBudget& budget, std::string& why) {
  std::string narrowing;
  std::optional<NarrowedStage> n = narrow_stage(full, element, budget.narrowed_elements, narrowing);
  if (!n) why = "element " + index_string(element) + " cannot be narrowed: " + narrowing;
  return n;
}

// Random values on a narrowed stage, its integer inputs over their whole
// range.
std::optional<Finding> random_at_full_size(NarrowedStage& n, const WitnessBudget& budget) {
  widen_integer_inputs(n.stage);
  return refute_by_testing(n.stage, budget.trials, /*aim_at_constants=*/true);
}

}  // namespace

Finding witnessed_at_full_size(const Finding& reduced, const Finding& f,
                               const std::vector<int64_t>& origin, int64_t size, bool whole_stage) {
  Finding out = reduced;
  out.elements.clear();
  for (const std::vector<int64_t>& e : f.elements) out.elements.push_back(lifted(e, origin));
  nlohmann::json differences = f.counterexample.value("differences", nlohmann::json::array());
  for (nlohmann::json& d : differences)
    d["element"] = lifted(d["element"].get<std::vector<int64_t>>(), origin);
  out.counterexample["full_size"] = {
      {"sub_stage_elements", size},
      {"differences", differences},
      {"inputs", f.counterexample.value("inputs", nlohmann::json::object())},
      {"functions", f.counterexample.value("functions", nlohmann::json::array())}};
  const size_t open = f.message.rfind(" (");
  const std::string how = open == std::string::npos
                              ? std::string("random values")
                              : f.message.substr(open + 2, f.message.size() - open - 3);
  // The claim is named at the message's start; naming it again here would
  // keep the finding out of the verdict store (outcome_codec.cpp stores no
  // message that quotes a name past its label).
  const std::string scope =
      whole_stage ? "exact on all " + std::to_string(size) + " elements of the full stage"
                  : "on the " + std::to_string(size) + " elements of the stage that element needs";
  out.message += "; replayed at full size: the claim differs at " +
                 index_string(out.elements.front()) + " (" + how + ", " + scope + ")";
  return out;
}

std::optional<Finding> full_size_witness(const Stage& full, const Stage& reduced,
                                         const Finding& finding, const ReducedValues* values,
                                         const WitnessBudget& budget, std::string& why) {
  why = "the finding names no element";
  for (size_t i = 0; i < finding.elements.size() && i < static_cast<size_t>(budget.elements_tried);
       ++i) {
    const std::vector<int64_t>& element = finding.elements[i];
    std::optional<NarrowedStage> n = narrowed_for(full, element, budget, why);
    if (!n) continue;
    const int64_t size = n->stage.element_count();
    std::optional<Finding> f;
    if (values) f = replay_lifted(n->stage, places_in_narrowed(*n), reduced, *values);
    if (!f) f = random_at_full_size(*n, budget);
    if (!f) {
      why = "the lifted counterexample and random values at full size on the " +
            std::to_string(size) + " elements that " + index_string(element) + " needs agree";
      continue;
    }
    return witnessed_at_full_size(finding, *f, n->origin, size);
  }
  // Too large to replay: the zero-padded lift needs no full-size run.
  std::string padded_why;
  if (values)
    if (std::optional<Finding> f = replay_zero_padded(full, reduced, *values, padded_why))
      return witnessed_at_full_size(finding, *f, {}, full.element_count(), /*whole_stage=*/true);
  if (values) why += "; " + padded_why;
  return std::nullopt;
}

std::optional<Finding> probe_at_full_size(const Stage& full,
                                          const std::vector<std::vector<int64_t>>& elements,
                                          const WitnessBudget& budget, std::string& why) {
  why = "no element to test";
  for (const std::vector<int64_t>& element : elements) {
    std::optional<NarrowedStage> n = narrowed_for(full, element, budget, why);
    if (!n) continue;
    const std::optional<Finding> f = random_at_full_size(*n, budget);
    if (!f) {
      why = "random values at full size on the sub-stages of " + std::to_string(elements.size()) +
            " elements agree";
      continue;
    }
    Finding out = *f;
    out.stage = "stage " + std::to_string(full.id) + ": " + full.title;
    out.elements.clear();
    for (const std::vector<int64_t>& e : f->elements) out.elements.push_back(lifted(e, n->origin));
    for (nlohmann::json& d : out.counterexample["differences"])
      d["element"] = lifted(d["element"].get<std::vector<int64_t>>(), n->origin);
    out.counterexample["reduced"] = false;
    out.counterexample["sub_stage_elements"] = n->stage.element_count();
    out.message = (f->parallel_tensors.empty() ? std::string("a claim") : f->parallel_tensors[0]) +
                  " differs from " + out.tensor + " at " + index_string(out.elements.front()) +
                  " (random values at full size on the " +
                  std::to_string(n->stage.element_count()) +
                  " elements of the stage that element needs; the stage is too large to prove)";
    return out;
  }
  return std::nullopt;
}

}  // namespace shardproof
