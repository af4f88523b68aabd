// The claim cone (engine/stage/claim_cone.h): the parallel side of the cut,
// stated once and walked by both forms of a plan. First the rule itself on a
// small graph; then one compact plan through both paths (expanded and cut;
// explored per coordinate, written out and cut), whose stage units must be
// the same, member for member and op for op.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/classes/compact_explore.h"
#include "engine/format/compact/compact_expand.h"
#include "engine/format/plan_parser.h"
#include "engine/stage/claim_cone.h"
#include "engine/stage/stage.h"

namespace shardproof {
namespace {

// A graph as lists: op k writes outs[k] from ins[k]; the view records what
// the walk does.
struct ListView {
  using Tensor = int;
  using Op = int;
  class Operands {
   public:
    explicit Operands(const std::vector<int>& in) : in_(in) {}
    std::optional<int> next() {
      if (next_ == in_.size()) return std::nullopt;
      return in_[next_++];
    }

   private:
    std::vector<int> in_;
    size_t next_ = 0;
  };

  std::vector<std::vector<int>> ins, outs;
  std::vector<int> producer_of;  // -1: a graph input
  std::set<int> claims, members;
  int end_at = -1;  // a stage input at which the walk ends

  std::vector<int> reached, stage_inputs, ops;
  std::set<int> seen, entered;
  int open = 0;  // tensors and ops entered, not yet left

  bool input(int t) const { return producer_of[t] < 0; }
  bool claimed(int t) const { return claims.count(t) > 0; }
  bool member(int t) const { return members.count(t) > 0; }
  void reach(int t) { reached.push_back(t); }
  bool stage_input(int t) {
    stage_inputs.push_back(t);
    return t != end_at;
  }
  bool enter_tensor(int t, bool) {
    if (!seen.insert(t).second) return false;
    ++open;
    return true;
  }
  int producer(int t) const { return producer_of[t]; }
  bool enter_op(int op) {
    if (!entered.insert(op).second) return false;
    ops.push_back(op);
    ++open;
    return true;
  }
  Operands operands(int op) {
    for (int out : outs[op]) reach(out);
    return Operands(ins[op]);
  }
  void leave_op(int) { --open; }
  void leave_tensor(int, bool) { --open; }
};

// t0 (input), t1 (input, claimed)
// op0: t2 = f(t0)          t2 claimed (outside the group)
// op1: t3, t4 = g(t2, t1)  t3 claimed: a member; t4 a second output
// op2: t5 = h(t3, t0)      t5 claimed: a member
// op3: t6 = k(t5)          t6 claimed: the member walked from
ListView small_graph() {
  ListView v;
  v.ins = {{0}, {2, 1}, {3, 0}, {5}};
  v.outs = {{2}, {3, 4}, {5}, {6}};
  v.producer_of = {-1, -1, 0, 1, 1, 2, 3};
  v.claims = {1, 2, 3, 5, 6};
  v.members = {3, 5, 6};
  return v;
}

TEST(ClaimCone, WalksThroughMembersAndStopsAtOtherClaimsAndInputs) {
  ListView v = small_graph();
  ASSERT_TRUE(walk_claim_cone(v, {6}));
  // Members t5 and t3 are walked through; claims t2 and t1 (an input) stop it.
  EXPECT_EQ(std::set<int>(v.ops.begin(), v.ops.end()), (std::set<int>{1, 2, 3}));
  EXPECT_EQ(std::set<int>(v.stage_inputs.begin(), v.stage_inputs.end()), (std::set<int>{1, 2}));
  // An op in the cone computes all its outputs: t4 is reached too.
  EXPECT_EQ(std::set<int>(v.reached.begin(), v.reached.end()),
            (std::set<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(v.open, 0) << "every enter has its leave";
  // Producers are entered before their inputs' producers (a walk back).
  EXPECT_EQ(v.ops, (std::vector<int>{3, 2, 1}));
}

TEST(ClaimCone, ANonMemberClaimStopsTheWalkEvenWhenItIsTheOnlyWay) {
  ListView v = small_graph();
  v.members = {6};  // t5 is now another group's claim
  ASSERT_TRUE(walk_claim_cone(v, {6}));
  EXPECT_EQ(v.ops, (std::vector<int>{3}));
  EXPECT_EQ(v.stage_inputs, (std::vector<int>{5}));
}

TEST(ClaimCone, AViewCanEndTheWalkAtAStageInput) {
  ListView v = small_graph();
  v.end_at = 2;
  EXPECT_FALSE(walk_claim_cone(v, {6}));
  EXPECT_EQ(v.stage_inputs.back(), 2);
}

// A stage unit by names (which differ in index between the two
// expansions): its members, and the ops of its cones by their first output.
std::string unit_text(const Plan& plan, const StageUnit& u) {
  auto names = [](const Graph& g, const std::vector<int>& ops) {
    std::set<std::string> out;
    for (int op : ops) out.insert(g.tensors[g.ops[op].out.at(0)].name);
    std::string s;
    for (const std::string& n : out) s += " " + n;
    return s;
  };
  std::set<std::string> members;
  for (int m : u.members) members.insert(plan.parallel.tensors[m].name);
  std::string s = stage_title(plan, u) + " members:";
  for (const std::string& m : members) s += " " + m;
  return s + "\n  parallel:" + names(plan.parallel, u.parallel_cone) +
         "\n  logical:" + names(plan.logical, u.logical_cone) +
         "\n  restricted:" + names(plan.logical, u.restricted);
}

std::map<std::string, int> units_of(const Plan& plan) {
  std::map<std::string, int> out;
  for (const StageUnit& u : cut_units(plan)) ++out[unit_text(plan, u)];
  return out;
}

// The stage units of the expansion, and of what the explorer selects at
// every coordinate of the mesh, written out: the same units.
TEST(ClaimCone, AnExpandedPlanAndItsClassesCutTheSameStages) {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) + "/examples/compact-dp2-tp2-mb2.json");
  std::stringstream text;
  text << in.rdbuf();
  ParseResult full =
      parse_plan_text(text.str(), "plan.json", "", ParseOptions{ParseOptions::Compact::Expand});
  ParseResult classes =
      parse_plan_text(text.str(), "plan.json", "", ParseOptions{ParseOptions::Compact::Classes});
  ASSERT_TRUE(full.plan && classes.plan && classes.plan->compact);
  const compact::CompactGraph& g = classes.plan->compact->graph;
  compact::Explorer explorer(g);
  compact::Selection selection(g), checked(g);
  for (int64_t rank = 0; rank < g.mesh.world; ++rank)
    for (int64_t mb = 0; mb < g.mesh.mb; ++mb) {
      compact::Coord c = g.mesh.coord(rank);
      c[compact::kMbAxis] = mb;
      explorer.explore(c, selection, checked);
    }
  compact::Expansion expansion = compact::expand_selected(g, selection);
  Plan sub = compact::read_selected(*classes.plan, expansion);
  const std::map<std::string, int> expanded = units_of(*full.plan), explored = units_of(sub);
  EXPECT_GT(expanded.size(), 4u);
  EXPECT_EQ(explored, expanded);
}

}  // namespace
}  // namespace shardproof
