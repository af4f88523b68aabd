#include "engine/infer/block_match.h"

#include <algorithm>
#include <functional>
#include <map>

#include <xxhash.h>

#include "engine/core/tensor.h"
#include "engine/ops/modular_algebra.h"
#include "engine/stage/stage_eval.h"

namespace shardproof::infer {
namespace {

using Alg = ModularAlgebra;

// Values divided by their first nonzero one, hashed: equal for tensors that
// are multiples of each other. `first` is 0 for an all-zero tensor.
uint64_t scaled_fingerprint(const std::vector<uint64_t>& values, uint64_t& first) {
  first = 0;
  for (uint64_t x : values)
    if (x != 0) {
      first = x;
      break;
    }
  if (first == 0) return 0;
  const Alg alg;
  const uint64_t inv = Alg::inverse(first);
  std::vector<uint64_t> normal(values.size());
  for (size_t i = 0; i < values.size(); ++i) normal[i] = alg.mul(values[i], inv);
  return XXH3_64bits(normal.data(), normal.size() * sizeof(uint64_t));
}

std::vector<uint64_t> block_values(const Valued& whole, const Shape& shape,
                                   const std::vector<int64_t>& block) {
  return slice_of(*whole.values, block_slice(shape, block)).data;
}

bool divides(const Shape& part, const Shape& whole) {
  if (part.size() != whole.size()) return false;
  for (size_t d = 0; d < part.size(); ++d)
    if (part[d] <= 0 || whole[d] % part[d] != 0) return false;
  return true;
}

}  // namespace

bool informative(const std::vector<uint64_t>& values) {
  if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end())
    return false;  // all one value: says nothing
  int64_t num = 0, den = 0;
  return !std::all_of(values.begin(), values.end(),
                      [&](uint64_t v) { return Alg::small_rational(v, num, den); });
}

bool worth_matching(const Valued& parallel) {
  const std::vector<uint64_t>& v = parallel.values->data;
  if (parallel.input_free)
    return dclass_of(parallel.dtype) == DClass::Bool &&
           std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) != v.end();
  return dclass_of(parallel.dtype) == DClass::Real && informative(v);
}

bool holds(const Tensor<uint64_t>& parallel, const Tensor<uint64_t>& logical,
           const SliceSpec& slice, int64_t num, int64_t den) {
  const std::vector<uint64_t> lv = slice_of(logical, slice).data;
  if (lv.size() != parallel.data.size()) return false;
  const Alg alg;
  const uint64_t factor = Alg::of(Rational(Rational(num) / Rational(den)));
  for (size_t i = 0; i < lv.size(); ++i)
    if (alg.mul(factor, lv[i]) != parallel.data[i]) return false;
  return true;
}

SliceSpec block_slice(const Shape& shape, const std::vector<int64_t>& block) {
  SliceSpec slice;
  for (size_t d = 0; d < shape.size(); ++d)
    slice.emplace_back(block[d] * shape[d], (block[d] + 1) * shape[d]);
  return slice;
}

std::optional<BlockIndex> BlockIndex::build(const std::vector<Valued>& logical, const Shape& shape,
                                            bool input_free, int64_t& budget, int64_t block_cost) {
  BlockIndex index;
  index.shape_ = shape;
  for (const Valued& l : logical) {
    if (!l.values || !divides(shape, l.values->shape)) continue;
    if (input_free ? !l.input_free : dclass_of(l.dtype) != DClass::Real) continue;
    Shape grid;
    for (size_t d = 0; d < shape.size(); ++d) grid.push_back(l.values->shape[d] / shape[d]);
    budget -= element_count(l.values->shape) + block_cost * element_count(grid);
    if (budget < 0) return std::nullopt;
    for (int64_t b = 0; b < element_count(grid); ++b) {
      std::vector<int64_t> block = unflatten(grid, b);
      uint64_t first = 0;
      const uint64_t key = scaled_fingerprint(block_values(l, shape, block), first);
      if (first != 0) index.refs_.emplace(key, Ref{&l, block, first});
    }
  }
  return index;
}

std::vector<BlockMatch> BlockIndex::matches(const Valued& parallel) const {
  std::vector<BlockMatch> found;
  uint64_t first = 0;
  const uint64_t key = scaled_fingerprint(parallel.values->data, first);
  if (first == 0) return found;
  const Alg alg;
  auto [lo, hi] = refs_.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    const Ref& ref = it->second;
    if (ref.logical->dtype != parallel.dtype) continue;
    int64_t num = 0, den = 1;
    const uint64_t ratio = alg.div(first, ref.first);
    if (!Alg::small_rational(ratio, num, den)) continue;
    // An input-free tensor is its input-free twin, not a multiple of it.
    if (parallel.input_free && (!ref.logical->input_free || num != den)) continue;
    // Guard against a fingerprint collision: compare every element.
    const std::vector<uint64_t> lv = block_values(*ref.logical, shape_, ref.block);
    bool equal = true;
    for (size_t i = 0; i < lv.size() && equal; ++i)
      equal = alg.mul(ratio, lv[i]) == parallel.values->data[i];
    if (equal) found.push_back(BlockMatch{ref.logical->index, ref.block, num, den});
  }
  // A tensor equal to two blocks of one logical tensor (a broadcast:
  // `param.expand_as(h)` on a data-parallel rank equals every row block) does
  // not say which block is its own; a guess names another rank's block, its
  // stage cannot prove it, and withdrawing the family drops every claim on
  // that tensor. Such a tensor stays inside its consumers' stages instead.
  std::map<int, int> blocks_of;
  for (const BlockMatch& m : found) ++blocks_of[m.logical];
  std::erase_if(found, [&](const BlockMatch& m) { return blocks_of[m.logical] > 1; });
  return found;
}

}  // namespace shardproof::infer
