// One operator of the plan format: its attribute checks, shape rule, axis
// relations (what shape reduction must keep), and semantics on the three algebras.
// Every operator lives in one file under engine/ops/ and is listed in
// op_registry.cpp; adding an operator touches those two places only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/core/attr.h"
#include "engine/core/ir.h"
#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"
#include "engine/ops/modular_algebra.h"

namespace shardproof {

struct TensorInfo {
  Shape shape;
  DType dtype = DType::F32;
};

// Everything an operator's semantics may read besides its input values.
struct OpCall {
  std::string op;
  AttrMap attrs;
  // Input shapes before shape reduction. Semantics whose constants depend on
  // sizes (mean, layernorm, rmsnorm) must use these, never the reduced ones.
  std::vector<Shape> full_in_shapes;
  std::vector<Shape> out_shapes;  // declared output shapes (reduced, if reduced)
  std::vector<DType> out_dtypes;
  std::vector<int> group;  // collectives only
};

// An axis of an op's operand: slot 0..n_in-1 are inputs, n_in.. outputs.
struct AxisRef {
  int slot;
  int dim;
};

// What an operator tells shape reduction about its axes. Positions along an
// axis are what lineage slices, slice offsets and collective pieces refer to.
class AxisRelations {
 public:
  virtual ~AxisRelations() = default;
  // a[i] and b[i] are the same position (elementwise, contraction, batch dims).
  virtual void same(AxisRef a, AxisRef b) = 0;
  // part[i] is whole[offset + i] (slice, concat/split pieces, gathers).
  virtual void sub_range(AxisRef part, AxisRef whole, int64_t offset) = 0;
  // whole[i] is the row-major combination of factors' positions (a reshape
  // that splits or merges dims): whole = factors[0] (x) factors[1] (x) ...
  virtual void product(AxisRef whole, const std::vector<AxisRef>& factors) {
    (void)whole, (void)factors;
  }
  // The axis must keep its full size (integer positions, reshapes that
  // cannot be mapped, anything whose semantics depends on exact sizes).
  virtual void freeze(AxisRef a) = 0;
  // An input axis whose values are combined into one (sum, mean, max,
  // contraction, the reductions inside softmax and norms). Its line keeps
  // its full size when the summand may repeat a value along it: reducing
  // it would change the count of the copies (docs/soundness.md, 3.2; an
  // axis no input axis is `same` as is one such repetition).
  virtual void combine(AxisRef /*in_axis*/) {}

  // ---- Integer positions (docs/soundness.md, "Integer positions").
  // `values`, `a`, `b`, `out` are operand slots numbered as in AxisRef. An
  // integer operand that an operator mentions in none of the calls below is
  // an *opaque* use: the line its values are positions on (if any) keeps its
  // full size. The defaults keep the conservative behaviour (the indexed axis
  // keeps its full size) for implementations that do not track values.

  // The values of integer operand `values` are positions along `axis`
  // (embedding ids on the table's rows, gather indices, iota along its dim).
  virtual void positions_on(int values, AxisRef axis) {
    (void)values;
    freeze(axis);
  }
  // Integer operands a and b hold positions of the same line at the same
  // offset (values moved by shape ops and collectives, where's branches and
  // result, integer-to-integer casts).
  virtual void same_positions(int /*a*/, int /*b*/) {}
  // out = a + sign * b (add: +1, sub: -1). Shape reduction accepts it as a
  // position shifted by a constant when b (or a, for add) is a `const`.
  virtual void shifted_positions(int /*out*/, int /*a*/, int /*b*/, int /*sign*/) {}
  // Integer operands a and b are compared: eq (ordered = false) or
  // lt, le, gt, ge (ordered = true).
  virtual void compared_positions(int /*a*/, int /*b*/, bool /*ordered*/) {}
};

// Maps a full-size position on an operand axis to its reduced position.
using PositionMap = std::function<int64_t(AxisRef axis, int64_t full_position)>;

class OpDef {
 public:
  virtual ~OpDef() = default;
  virtual std::string name() const = 0;
  virtual bool collective() const { return false; }

  // Checks the attributes (unknown keys, missing required ones, types,
  // ranges) and the inputs (count, ranks, dtype classes), and computes the
  // outputs' shapes and dtypes. `n_out` is how many outputs the plan lists
  // (split and collectives have several). Returns "" when valid, otherwise
  // a message that says what was expected and what was found.
  virtual std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                            std::vector<TensorInfo>& out) const = 0;

  // Plan validation calls this after `infer` with the plan's declared
  // outputs: an operator whose output dtype the declaration decides (`const`
  // without a `dtype` attribute takes the dtype of the tensor it defines)
  // sets it in `out` and checks it fits. Returns "" or a message. Default:
  // nothing to take.
  virtual std::string take_declared_dtypes(const AttrMap& attrs,
                                           const std::vector<TensorInfo>& declared,
                                           std::vector<TensorInfo>& out) const {
    (void)attrs, (void)declared, (void)out;
    return "";
  }

  // Relations between axes of inputs and outputs, for shape reduction.
  // Broadcast (size-1) dims need no relation. The default freezes every axis.
  virtual void relate_axes(const AttrMap& attrs, const std::vector<TensorInfo>& in,
                           const std::vector<TensorInfo>& out, AxisRelations& rel) const;

  // Attributes for a reduced instance whose operands have the given reduced
  // shapes. Attributes that carry sizes or positions (reshape/expand/const/
  // iota shape, slice start/end, split sizes) must be rewritten; `position`
  // maps full positions along an axis. Default: attributes unchanged.
  virtual AttrMap reduce_attrs(const AttrMap& attrs, const std::vector<Shape>& reduced_in,
                               const std::vector<Shape>& reduced_out,
                               const PositionMap& position) const;

  virtual std::vector<Tensor<Rational>> eval(ConcreteAlgebra& alg, const OpCall& call,
                                             const std::vector<Tensor<Rational>>& in) const = 0;
  virtual std::vector<Tensor<z3::expr>> eval(Z3Algebra& alg, const OpCall& call,
                                             const std::vector<Tensor<z3::expr>>& in) const = 0;
  virtual std::vector<Tensor<uint64_t>> eval(ModularAlgebra& alg, const OpCall& call,
                                             const std::vector<Tensor<uint64_t>>& in) const = 0;
};

// Writes the three eval overloads from one template: Impl has
//   static std::string name();
//   static std::string infer(...);            same signature as OpDef::infer
//   template <class Alg> static std::vector<Tensor<typename Alg::Value>>
//       eval(Alg&, const OpCall&, const std::vector<Tensor<typename Alg::Value>>&);
// and optionally relate_axes / reduce_attrs by overriding in a subclass.
template <class Impl>
class TemplateOpDef : public OpDef {
 public:
  std::string name() const override { return Impl::name(); }
  std::string infer(const AttrMap& attrs, const std::vector<TensorInfo>& in, size_t n_out,
                    std::vector<TensorInfo>& out) const override {
    return Impl::infer(attrs, in, n_out, out);
  }
  std::vector<Tensor<Rational>> eval(ConcreteAlgebra& alg, const OpCall& call,
                                     const std::vector<Tensor<Rational>>& in) const override {
    return Impl::eval(alg, call, in);
  }
  std::vector<Tensor<z3::expr>> eval(Z3Algebra& alg, const OpCall& call,
                                     const std::vector<Tensor<z3::expr>>& in) const override {
    return Impl::eval(alg, call, in);
  }
  std::vector<Tensor<uint64_t>> eval(ModularAlgebra& alg, const OpCall& call,
                                     const std::vector<Tensor<uint64_t>>& in) const override {
    return Impl::eval(alg, call, in);
  }
};

}  // namespace shardproof
