#include "engine/prove/counterexample.h"

namespace shardproof {
namespace {

nlohmann::json tensor_json(const Tensor<Rational>& t) {
  nlohmann::json values = nlohmann::json::array();
  for (int64_t i = 0; i < t.size() && i < 64; ++i) values.push_back(rational_to_string(t.data[i]));
  return {{"shape", t.shape}, {"values", values}, {"truncated", t.size() > 64}};
}

// Integer values that are positions on a reduced line, as the full-size
// positions they stand for (docs/soundness.md, "Integer positions").
void add_full_values(nlohmann::json& j, const Tensor<Rational>& t, const ValueMap& map) {
  nlohmann::json values = nlohmann::json::array();
  for (int64_t i = 0; i < t.size() && i < 64; ++i) {
    if (t.data[i].get_den() != 1 || !t.data[i].get_num().fits_slong_p()) return;
    values.push_back(map.to_full(t.data[i].get_num().get_si()));
  }
  j["full_values"] = values;
}

}  // namespace

std::vector<int64_t> full_index(const Stage& stage, int64_t element) {
  Shape extent;
  for (auto& [lo, hi] : stage.slice) extent.push_back(hi - lo);
  std::vector<int64_t> local = unflatten(extent, element);
  std::vector<int64_t> full;
  for (size_t d = 0; d < local.size(); ++d)
    full.push_back(
        stage.full_index(stage.target, static_cast<int>(d), local[d] + stage.slice[d].first));
  return full;
}

nlohmann::json counterexample_json(const Stage& stage, const StageValues<ConcreteAlgebra>& values,
                                   const ClaimChecks<Rational>& claim,
                                   const std::vector<int64_t>& differing) {
  nlohmann::json cx;
  nlohmann::json inputs = nlohmann::json::object();
  nlohmann::json parts = nlohmann::json::object();
  for (size_t t = 0; t < stage.tensors.size(); ++t) {
    const StageTensor& st = stage.tensors[t];
    if (!st.free || !values[t]) continue;
    if (!st.parallel) {
      inputs[st.name] = tensor_json(*values[t]);
      if (stage.reduced && t < stage.value_maps.size() && stage.value_maps[t])
        add_full_values(inputs[st.name], *values[t], *stage.value_maps[t]);
    }
    if (st.parallel && st.of && st.of->has_part) parts[st.name] = tensor_json(*values[t]);
  }
  cx["inputs"] = inputs;
  if (!parts.empty()) cx["parts"] = parts;
  nlohmann::json at = nlohmann::json::array();
  for (size_t i = 0; i < differing.size() && i < 8; ++i) {
    const ElementCheck<Rational>& c = claim.checks[differing[i]];
    at.push_back({{"element", full_index(stage, differing[i])},
                  {"parallel", rational_to_string(c.parallel)},
                  {"logical", rational_to_string(c.logical)}});
  }
  cx["differences"] = at;
  cx["reduced"] = stage.reduced;
  return cx;
}

}  // namespace shardproof
