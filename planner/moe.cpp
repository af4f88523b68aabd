// The MoE families: DeepSeek-V3 at its published shape where it applies, and
// a tiny one for tests; the step is the transformer builder's with MoE layers
// (moe_*.cpp).
#include "planner/family.h"
#include "planner/transformer.h"

namespace shardproof::planner {

namespace {

using transformer::ModelShape;

ModelShape moe_shape(ModelShape dense, int64_t experts, int64_t capacity, int64_t expert_ffn,
                     int64_t shared_ffn, int first_dense) {
  dense.experts = experts;
  dense.capacity = capacity;
  dense.expert_ffn = expert_ffn;
  dense.shared_ffn = shared_ffn;
  dense.first_dense = first_dense;
  return dense;
}

const std::vector<ModelShape>& shapes() {
  static const std::vector<ModelShape> all = {
      // DeepSeek-V3: 61 layers, hidden 7168, 128 heads, vocabulary 129280,
      // the first 3 layers dense (ffn 18432), then 256 routed experts (ffn
      // 2048) and 1 shared expert (ffn 2048); seq 4096 (pre-training
      // length). Attention is this planner's GQA, not MLA: 128 kv heads
      // (MLA's per-head K/V once decompressed), head dim 7168/128 = 56.
      // Capacity: 8 of 256 experts per token, factor 1: 4096*8/256 = 128
      // slots per expert and sequence.
      moe_shape({"deepseek-v3", 61, 7168, 128, 128, 18432, 129280, 4096, 4}, 256, 128, 2048, 2048,
                3),
      // Layer 0 dense, layer 1 MoE: 4 experts with 4 slots per sequence
      // (top-2 of 4 over 8 tokens), expert ffn 8, shared expert ffn 16.
      moe_shape({"moe-tiny", 2, 16, 4, 2, 32, 16, 8, 4}, 4, 4, 8, 16, 1),
  };
  return all;
}

template <int kIndex>
const ModelFamily& family() {
  static const ModelFamily f{
      shapes()[kIndex].name, [] { return transformer::family_bugs(shapes()[kIndex]); },
      [](const PlanConfig& c) { return transformer::transformer_plan(shapes()[kIndex], c); },
      [](const PlanConfig& c) {
        return transformer::transformer_first_tensor(shapes()[kIndex], c);
      }};
  return f;
}

}  // namespace

std::vector<const ModelFamily*> moe_families() {
  return {&family<0>(), &family<1>()};
}

}  // namespace shardproof::planner
