// The llama3 family: Llama-3 8B/70B/405B at their published shapes (layers,
// hidden, heads, kv heads, ffn, vocabulary) and a tiny one for tests; the
// step itself is the transformer builder's.
#include <stdexcept>

#include "planner/family.h"
#include "planner/transformer.h"

namespace shardproof::planner {

namespace {

using transformer::ModelShape;

// Published Llama-3 shapes; seq 8192 (the context length), 2 sequences per dp
// rank and micro-batch by default (--batch overrides).
const std::vector<ModelShape>& shapes() {
  static const std::vector<ModelShape> all = {
      {"llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 4},
      {"llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 4},
      {"llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192, 4},
      // Small enough that every stage also verifies at full size.
      {"llama3-tiny", 2, 16, 4, 2, 32, 16, 8, 4},
  };
  return all;
}

const ModelShape& shape(const std::string& name) {
  for (const ModelShape& s : shapes())
    if (s.name == name) return s;
  throw std::invalid_argument("unknown llama3 model " + name);
}

std::vector<BugInfo> bugs() {
  std::vector<BugInfo> infos;
  for (const transformer::BugSpec& b : transformer::bug_table()) infos.push_back(b.info);
  return infos;
}

transformer::Layout layout(const std::string& model, const PlanConfig& config) {
  PlanConfig c = config;
  // Default batch: enough sequences for every dp rank and micro-batch.
  if (c.batch == 0) c.batch = c.dp * c.microbatches;
  return transformer::Layout(shape(model), c);
}

std::string plan_name(const transformer::Layout& s) {
  auto n = [](auto v) { return std::to_string(v); };
  std::string name = s.model.name + " L" + n(s.L) + " b" + n(s.B) + " s" + n(s.S) + " dp" +
                     n(s.dp) + " tp" + n(s.tp) + " pp" + n(s.pp);
  if (s.cp > 1) name += " cp" + n(s.cp);
  if (s.sp) name += " sp";
  if (s.zero) name += " zero" + n(s.zero);
  if (s.tie) name += " tied";
  name += " mb" + n(s.mb) + " " + s.c.optimizer;
  if (!s.c.bug.empty()) name += ", bug " + s.c.bug;
  return name;
}

nlohmann::json generate(const std::string& model, const PlanConfig& config) {
  transformer::Layout s = layout(model, config);
  const transformer::BugSpec* bug = transformer::find_bug(s, model);
  GraphBuilder logical;
  transformer::Layout one = s.single_device();
  transformer::Builder(one, logical).build();
  GraphBuilder parallel(&logical, s.world());
  transformer::Builder(s, parallel).build();
  nlohmann::json meta = {{"model", model},       {"layers", s.L},     {"hidden", s.H},
                         {"heads", s.NH},        {"kv_heads", s.NKV}, {"ffn", s.F},
                         {"vocab", s.V},         {"seq", s.S},        {"batch", s.B},
                         {"dp", s.dp},           {"tp", s.tp},        {"pp", s.pp},
                         {"cp", s.cp},           {"sp", s.sp},        {"zero", s.zero},
                         {"tie_embeddings", s.tie}, {"microbatches", s.mb},
                         {"optimizer", s.c.optimizer}};
  if (bug) {
    meta["bug"] = bug->info.name;
    meta["bug_first_tensor"] = bug->first_tensor(s);
  }
  return {{"format", "shardproof-plan/1"},
          {"name", plan_name(s)},
          {"meta", std::move(meta)},
          {"logical", logical.to_json()},
          {"parallel", parallel.to_json()}};
}

std::string first_tensor(const std::string& model, const PlanConfig& config) {
  transformer::Layout s = layout(model, config);
  const transformer::BugSpec* bug = transformer::find_bug(s, model);
  if (!bug) throw std::invalid_argument(model + ": no bug in this config");
  return bug->first_tensor(s);
}

template <int kIndex>
const ModelFamily& family() {
  static const ModelFamily f{
      shapes()[kIndex].name, &bugs,
      [](const PlanConfig& c) { return generate(shapes()[kIndex].name, c); },
      [](const PlanConfig& c) { return first_tensor(shapes()[kIndex].name, c); }};
  return f;
}

}  // namespace

std::vector<const ModelFamily*> llama3_families() {
  return {&family<0>(), &family<1>(), &family<2>(), &family<3>()};
}

}  // namespace shardproof::planner
