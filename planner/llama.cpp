// The llama3 family: Llama-3 8B/70B/405B at their published shapes (layers,
// hidden, heads, kv heads, ffn, vocabulary) and a tiny one for tests; the
// step itself is the transformer builder's.
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

std::vector<BugInfo> bugs() {
  return transformer::family_bugs(shapes().front());
}

template <int kIndex>
const ModelFamily& family() {
  static const ModelFamily f{
      shapes()[kIndex].name, &bugs,
      [](const PlanConfig& c) { return transformer::transformer_plan(shapes()[kIndex], c); },
      [](const PlanConfig& c) {
        return transformer::transformer_first_tensor(shapes()[kIndex], c);
      }};
  return f;
}

}  // namespace

std::vector<const ModelFamily*> llama3_families() {
  return {&family<0>(), &family<1>(), &family<2>(), &family<3>()};
}

}  // namespace shardproof::planner
