// Matching values by blocks (claim inference): which blocks of which logical
// tensors a parallel tensor's values equal, up to a small rational factor.
//
// A logical tensor is cut into equal blocks of the parallel tensor's shape
// (a grid); each block's values are fingerprinted up to a factor, and a
// parallel tensor's fingerprint finds its candidates, confirmed element by
// element. The values are residues modulo a prime (ops/modular_algebra.h).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/core/ir.h"
#include "engine/core/tensor.h"

namespace shardproof::infer {

// A tensor's values for matching: `index` is the caller's own numbering;
// `input_free`: no input reaches it (input_free.h).
struct Valued {
  int index = -1;
  DType dtype = DType::F32;
  const Tensor<uint64_t>* values = nullptr;
  bool input_free = false;
};

// A parallel tensor's values are `scale_num / scale_den` times the block at
// grid coordinate `block` of logical tensor `logical` (a Valued index).
struct BlockMatch {
  int logical = -1;
  std::vector<int64_t> block;
  int64_t scale_num = 1, scale_den = 1;
};

// Values worth matching: not all one value and not all small rationals
// (masks, one-hots, positions and counts match other blocks by coincidence).
bool informative(const std::vector<uint64_t>& values);

// Whether a parallel tensor is matched at all: real and informative, or an
// input-free mask that is not one value throughout (a causal mask: it can
// equal only what it equals for every input, and it matches input-free
// logical tensors only, exactly). Input-free integers and reals are not:
// claimed, a position table (iota) becomes a free variable in the stages
// that read it, and a one-hot or a shard offset built from it no longer
// proves; a mask is only selected by, so both sides reading one claimed mask
// agree whatever its values.
bool worth_matching(const Valued& parallel);

// Whether `parallel` is `num / den` times `logical[slice]`: a match found on
// one evaluation, confirmed on another.
bool holds(const Tensor<uint64_t>& parallel, const Tensor<uint64_t>& logical,
           const SliceSpec& slice, int64_t num, int64_t den);

// The slice of the block at grid coordinate `block` of blocks shaped `shape`.
SliceSpec block_slice(const Shape& shape, const std::vector<int64_t>& block);

// The blocks shaped `shape` of a set of logical tensors, by fingerprint.
class BlockIndex {
 public:
  // Nullopt when indexing would take more than `budget` (which is reduced by
  // what it takes): each element read costs 1, each block kept `block_cost`
  // (an entry of the index, which memory pays for where hashing is cheap).
  // `input_free`: the index for input-free tensors, of the input-free
  // logical tensors alone (any dtype); otherwise of the real ones.
  static std::optional<BlockIndex> build(const std::vector<Valued>& logical, const Shape& shape,
                                         bool input_free, int64_t& budget, int64_t block_cost = 0);

  // Every indexed block that `parallel` (shaped like the blocks) equals up to
  // a small rational factor; an input-free tensor (from the input-free
  // index), every block it equals exactly.
  std::vector<BlockMatch> matches(const Valued& parallel) const;

 private:
  struct Ref {
    const Valued* logical;
    std::vector<int64_t> block;
    uint64_t first;  // the block's first nonzero value
  };
  Shape shape_;
  std::unordered_multimap<uint64_t, Ref> refs_;
};

}  // namespace shardproof::infer
