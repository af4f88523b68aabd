// The parallel side of the cut, stated once (design.md, "The pipeline";
// stage.h): the ops a claim group's stage holds are those reached walking
// back from the group's members, from a tensor to the op that writes it and
// from an op to every one of its inputs, stopping at graph inputs and at
// tensors that carry lineage outside the group (the stage's parallel
// inputs, whose claims are assumed). An op in the cone computes all of its
// outputs.
//
// Two forms of a parallel graph walk it through a view:
//   - an expanded plan's Graph (stage.cpp: the cones of a stage unit, and
//     whether a member is computed from a claim on its target);
//   - a compact plan's instances around an anchor coordinate
//     (classes/compact_explore.cpp): the explorer writes out what the walk
//     reaches, and the cut above then runs on that expansion. Were the two
//     walks written apart, a class could verify other stages than the
//     expansion's (the guard is ClassVerifier.ClassesDecideExactly...).
//
// Where the two views differ, and why the cones still agree:
//   - membership: the Graph view knows the unit's members (a unit may be
//     half a group, stage.cpp split_members); the explorer's does not, and
//     stops at a member reached as another's input. It walks every member
//     of the group as a root (explore()), so it reaches the same ops.
//   - the explorer's group is found by solving equations over the mesh and
//     ignores a claim's scale: a superset, which the cut on the expansion
//     sorts into its own groups (cut_units).
//   - a tensor that is neither an input nor written by an op: the plan
//     parser refuses it (rule dangling-tensor) before a Graph is cut; the
//     explorer's view throws ExploreError (the class verifier says unknown).
//   - a collective is one op of the Graph, one instance per group member in
//     the compact plan (the explorer's view lists every member's operands);
//     a send's output is named at its receiver.
//   - the explorer records every decision of its walk (a hash per node,
//     compact_explore.h) and keeps a node's walk across anchors: its view's
//     enter/leave bracket each node.
// The logical side of the cut (demanded regions, restricted claims) and the
// splitting of groups are the Graph's only: the class verifier writes the
// logical graph out whole and cuts the expansion with stage.cpp.
//
// The walk is iterative: a cone may be a whole model deep.
#pragma once

#include <optional>
#include <vector>

namespace shardproof {

// A view of a parallel graph for walk_claim_cone:
//   using Tensor, Op;                       copyable handles
//   bool input(const Tensor&);              a graph input: never written
//   bool claimed(const Tensor&);            carries lineage
//   bool member(const Tensor&);             a member of the group walked
//   void reach(const Tensor&);              every tensor the walk reaches
//   bool stage_input(const Tensor&);        a claimed tensor outside the group,
//                                           a graph input or not (the walk
//                                           stops there); false ends the walk
//   bool enter_tensor(const Tensor&, bool root);  false: walked before
//   Op producer(const Tensor&);             the op that writes it
//   bool enter_op(const Op&);               false: walked before
//   Operands operands(const Op&);           its inputs, in order, through
//                                           std::optional<Tensor> next() (the
//                                           view reaches its outputs itself)
//   void leave_op(const Op&);
//   void leave_tensor(const Tensor&, bool root);
// A tensor's walk (enter .. leave) holds its producer's, which holds those
// of the op's inputs in order.
template <class View>
class ClaimConeWalk {
 public:
  using Tensor = typename View::Tensor;
  using Op = typename View::Op;

  explicit ClaimConeWalk(View& view) : v_(view) {}

  // Walks the cone from `root`, a member of the group. False if the view
  // ended the walk.
  bool from(const Tensor& root) {
    if (!visit(root, true)) return false;
    while (!stack_.empty()) {
      std::optional<Tensor> in = stack_.back().operands.next();
      if (!in) {
        Frame done = std::move(stack_.back());
        stack_.pop_back();
        v_.leave_op(done.op);
        v_.leave_tensor(done.tensor, done.root);
        continue;
      }
      if (!visit(*in, false)) return false;
    }
    return true;
  }

 private:
  struct Frame {
    Tensor tensor;  // walked back to `op`, its producer
    bool root;
    Op op;
    typename View::Operands operands;
  };

  // The rule of the cut: reach `t`; stop at inputs and at stage inputs;
  // else walk to its producer (once).
  bool visit(const Tensor& t, bool root) {
    v_.reach(t);
    if (v_.claimed(t) && !root && !v_.member(t)) return v_.stage_input(t);
    if (v_.input(t)) return true;
    if (!v_.enter_tensor(t, root)) return true;
    Op op = v_.producer(t);
    if (!v_.enter_op(op)) {
      v_.leave_tensor(t, root);
      return true;
    }
    typename View::Operands operands = v_.operands(op);
    stack_.push_back(Frame{t, root, std::move(op), std::move(operands)});
    return true;
  }

  View& v_;
  std::vector<Frame> stack_;
};

// Walks the claim cone of `roots` (members of one group) through `view`, one
// root after the other. False if the view ended the walk.
template <class View>
bool walk_claim_cone(View& view, const std::vector<typename View::Tensor>& roots) {
  ClaimConeWalk<View> walk(view);
  for (const typename View::Tensor& root : roots)
    if (!walk.from(root)) return false;
  return true;
}

}  // namespace shardproof
