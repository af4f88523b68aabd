// A dense row-major tensor of values of any algebra (exact rationals for the
// interpreter, z3::expr for the symbolic encoding).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/core/ir.h"

namespace shardproof {

// Flat offset of a multi-index; precondition: index within shape.
int64_t flat_index(const Shape& shape, const std::vector<int64_t>& index);
// Multi-index of a flat offset.
std::vector<int64_t> unflatten(const Shape& shape, int64_t flat);

template <class V>
struct Tensor {
  Shape shape;
  DClass cls = DClass::Real;
  std::vector<V> data;  // element_count(shape) values, row-major; V may lack a default ctor

  int64_t size() const { return static_cast<int64_t>(data.size()); }
  const V& at(const std::vector<int64_t>& index) const { return data[flat_index(shape, index)]; }
};

// Thrown by an algebra when an operation leaves its domain in concrete
// evaluation (division by zero, an index out of range): the plan's
// assumptions do not hold for these values.
struct EvalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace shardproof
