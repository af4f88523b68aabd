// Megatron's expert mesh with expert tensor parallelism below tp (--etp):
// ep x etp x edp re-factors the tp x dp ranks (docs/planner-moe.md). Rank
// (d, t) is etp rank t % etp of token split t / etp; its expert-dp index
// q = d * tp / etp + t / etp has ep rank q % ep and edp rank q / ep. Correct
// plans verify equivalent at several (dp, tp, etp, ep); the groups are the
// mesh's; the bugs of this mesh (and the MoE bugs that apply on it) are
// found first at the tensor they name; what is not written is refused by
// name with exit status 2; --etp equal to tp is the plan without --etp.
//
// moe-tiny: layer 0 dense, layer 1 MoE (4 experts of 4 slots, expert ffn 8);
// without --batch the planner gives each token split one sequence.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "tests/cli_runner.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using planner::PlanConfig;

const char* const kTiny = "moe-tiny";

PlanConfig mesh(int dp, int tp, int etp, int ep, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(2, dp, tp, 1, 1);
  c.etp = etp;
  c.ep = ep;
  if (edit) edit(c);
  return c;
}

struct Case {
  std::string label;
  PlanConfig config;
};

std::vector<Case> correct_cases() {
  return {
      // ep 1: every rank runs every expert on its split, summed over tp x dp.
      {"tp2_etp1_ep1", mesh(1, 2, 1, 1)},
      // The two tp ranks of one dp rank own two experts each.
      {"tp2_etp1_ep2", mesh(1, 2, 1, 2)},
      // ep groups {q0, q1} = the tp group of each dp rank, edp {q0, q2}.
      {"dp2_tp2_etp1_ep2", mesh(2, 2, 1, 2)},
      // One ep group over all four ranks: one expert each, edp 1.
      {"dp2_tp2_etp1_ep4", mesh(2, 2, 1, 4)},
      // ep groups across dp ranks: {q0, q1, q2, q3} of 8 indices, edp {q0, q4}.
      {"dp4_tp2_etp1_ep4", mesh(4, 2, 1, 4)},
      // etp 2 of tp 4: two splits, the expert ffn over each etp pair.
      {"tp4_etp2_ep2", mesh(1, 4, 2, 2)},
      {"dp2_tp2_etp1_ep2_mb2_pp2",
       mesh(2, 2, 1, 2, [](PlanConfig& c) { c.microbatches = 2, c.pp = 2; })},
      // Sequence parallelism: the tokens gathered into whole sequences, then split.
      {"tp2_etp1_ep2_sp", mesh(1, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })},
      {"dp2_tp2_etp1_ep2_sp", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })},
      {"tp4_etp2_ep2_sp", mesh(1, 4, 2, 2, [](PlanConfig& c) { c.sp = true; })},
      // ZeRO: an expert block sharded over its edp group (4 ranks at ep 1:
      // one expert each), the dense weights over dp.
      {"dp2_tp2_etp1_ep2_zero1", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.zero = 1; })},
      {"dp2_tp2_etp1_ep1_zero2", mesh(2, 2, 1, 1, [](PlanConfig& c) { c.zero = 2; })},
      {"dp2_tp2_etp1_ep2_zero3", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.zero = 3; })},
      // --clip: the experts' squares summed over each edp index's ep x etp
      // ranks (every rank under ZeRO).
      {"dp2_tp2_etp1_ep2_clip", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true; })},
      {"tp4_etp2_ep2_clip_pp2", mesh(1, 4, 2, 2, [](PlanConfig& c) { c.clip = true, c.pp = 2; })},
      {"dp2_tp2_etp1_ep2_clip_zero2",
       mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true, c.zero = 2; })},
      // Context parallelism: an ep group per cp rank, expert blocks summed over edp x cp.
      {"dp2_tp2_etp1_ep2_cp2", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.cp = 2; })},
      {"tp2_etp1_ep1_cp2_sp", mesh(1, 2, 1, 1, [](PlanConfig& c) { c.cp = 2, c.sp = true; })},
      // The interleaved pipeline: layers {0}, {1} on pp rank 0 and 1, then {2}, {3}.
      {"tp2_etp1_ep2_pp2_vpp2_mb2",
       mesh(1, 2, 1, 2,
            [](PlanConfig& c) { c.layers = 4, c.pp = 2, c.vpp = 2, c.microbatches = 2; })},
      {"dp2_tp2_etp1_ep2_two_sequences", mesh(2, 2, 1, 2, [](PlanConfig& c) { c.batch = 8; })},
  };
}

class MoeEtpCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEtpCorrect, IsEquivalent) {
  const Case& c = GetParam();
  const json plan = planner::generate_plan(kTiny, c.config);
  EXPECT_EQ(plan["meta"]["etp"], c.config.etp);
  const Report r = testing::verify_json(plan, "moe-etp-" + c.label);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << c.label << "\n" << testing::explain(r);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeEtpCorrect, ::testing::ValuesIn(correct_cases()),
                         [](const auto& info) { return info.param.label; });

json op_named(const json& plan, const std::string& name) {
  for (const json& op : plan["parallel"]["ops"])
    if (op["name"] == name) return op;
  ADD_FAILURE() << "no op " << name;
  return json();
}

// dp2 tp2 etp1 ep4: ranks 0..3 are (d, t) = (0, 0), (0, 1), (1, 0), (1, 1)
// and q = rank. The all_to_all spans all four, the experts' gradients have
// no replica, the dense ones are summed over dp at each tp rank, and each
// rank holds one whole expert (no ffn split).
TEST(MoeEtpPlan, GroupsAreTheExpertMesh) {
  const json plan = planner::generate_plan(kTiny, mesh(2, 2, 1, 4));
  EXPECT_EQ(op_named(plan, "dp0.tp0.pp0.mb0.l1.moe.xin.ep_dispatch")["group"], json({0, 1, 2, 3}));
  EXPECT_EQ(op_named(plan, "dp1.tp0.pp0.mb0.l1.moe.out.split_all_gather")["group"], json({2, 3}));
  EXPECT_EQ(op_named(plan, "dp0.tp1.pp0.grad.l1.moe.wsg.dp_all_reduce")["group"], json({1, 3}));
  const json& w = plan["parallel"]["tensors"]["dp1.tp0.pp0.l1.moe.wg"];
  EXPECT_EQ(w["shape"], json({1, 16, 8}));
  EXPECT_EQ(w["of"]["slice"][0], json({2, 3}));  // q 2: expert 2
  for (const json& op : plan["parallel"]["ops"])
    EXPECT_NE(op["name"], "dp0.tp0.pp0.grad.l1.moe.wg.dp_all_reduce") << "edp is 1: no sync";

  // dp2 tp2 etp1 ep2: edp groups {q0, q2} = ranks {0, 2} and {1, 3}.
  const json ep2 = planner::generate_plan(kTiny, mesh(2, 2, 1, 2));
  EXPECT_EQ(op_named(ep2, "dp0.tp1.pp0.grad.l1.moe.wg.dp_all_reduce")["group"], json({1, 3}));
  EXPECT_EQ(op_named(ep2, "dp1.tp0.pp0.mb0.l1.moe.xin.ep_dispatch")["group"], json({2, 3}));

  // tp4 etp2 ep2: q = t / 2, ep groups {t0, t2} and {t1, t3} per etp rank,
  // the expert ffn partials summed over {t0, t1} and {t2, t3}.
  const json etp2 = planner::generate_plan(kTiny, mesh(1, 4, 2, 2));
  EXPECT_EQ(op_named(etp2, "dp0.tp1.pp0.mb0.l1.moe.xin.ep_dispatch")["group"], json({1, 3}));
  EXPECT_EQ(op_named(etp2, "dp0.tp2.pp0.mb0.l1.moe.out.etp_all_reduce")["group"], json({2, 3}));
  EXPECT_EQ(etp2["parallel"]["tensors"]["dp0.tp3.pp0.l1.moe.wg"]["of"]["slice"],
            json({{2, 4}, {0, 16}, {4, 8}}));

  // ZeRO-2 at dp2 tp2 etp1 ep1: the expert block (every expert) has 4
  // replicas, q = rank; each keeps expert q.
  const json z2 =
      planner::generate_plan(kTiny, mesh(2, 2, 1, 1, [](PlanConfig& c) { c.zero = 2; }));
  EXPECT_EQ(op_named(z2, "dp0.tp0.pp0.grad.l1.moe.wg.dp_reduce_scatter")["group"],
            json({0, 1, 2, 3}));
  EXPECT_EQ(op_named(z2, "dp0.tp0.pp0.l1.moe.wg.zero_all_gather")["group"], json({0, 1, 2, 3}));
  EXPECT_EQ(z2["parallel"]["tensors"]["dp1.tp0.pp0.l1.moe.wg.shard"]["of"]["slice"][0],
            json({2, 3}));
}

// --etp equal to tp is Megatron's default: the same plan as without --etp.
TEST(MoeEtpPlan, EtpEqualToTpIsThePlanWithout) {
  for (PlanConfig c : {mesh(2, 2, 2, 2), mesh(4, 2, 2, 2), mesh(1, 4, 4, 1)}) {
    const json with = planner::generate_plan(kTiny, c);
    c.etp = 0;
    EXPECT_EQ(with.dump(), planner::generate_plan(kTiny, c).dump()) << c.tp;
  }
}

struct BugCase {
  std::string label;
  PlanConfig config;
};

std::vector<BugCase> bug_cases() {
  auto bug = [](const char* label, const char* name, PlanConfig c) {
    c.bug = name;
    return BugCase{label, c};
  };
  return {
      // The bugs of this mesh.
      bug("tokens_not_split", "etp-tokens-not-split", mesh(1, 2, 1, 2)),
      bug("tokens_not_split_etp2", "etp-tokens-not-split", mesh(1, 4, 2, 2)),
      bug("split_gather_reversed", "etp-split-gather-reversed", mesh(1, 2, 1, 2)),
      bug("split_gather_reversed_ep1", "etp-split-gather-reversed", mesh(2, 2, 1, 1)),
      // dp group {0, 2} where edp is every rank (ep 1), or where no rank
      // shares a block (ep 4: other experts summed in).
      bug("expert_grad_on_dp_group_ep1", "etp-expert-grad-on-dp-group", mesh(2, 2, 1, 1)),
      bug("expert_grad_on_dp_group_ep4", "etp-expert-grad-on-dp-group", mesh(2, 2, 1, 4)),
      bug("tokens_not_split_sp", "etp-tokens-not-split",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })),
      bug("expert_grad_on_dp_group_sp", "etp-expert-grad-on-dp-group",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.sp = true; })),
      bug("expert_grad_on_dp_group_cp2", "etp-expert-grad-on-dp-group",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.cp = 2; })),
      // MoE bugs that apply on this mesh.
      bug("vpp_send_wrong_chunk", "vpp-send-wrong-chunk",
          mesh(1, 2, 1, 2,
               [](PlanConfig& c) { c.layers = 4, c.pp = 2, c.vpp = 2, c.microbatches = 2; })),
      bug("expert_grad_not_synced", "expert-grad-not-synced", mesh(1, 2, 1, 1)),
      bug("expert_grad_averaged_over_edp", "expert-grad-averaged-over-edp", mesh(2, 2, 1, 2)),
      bug("expert_out_not_reduced_etp", "expert-out-not-reduced-tp", mesh(1, 4, 2, 2)),
      bug("expert_grad_not_reduced_etp", "expert-grad-not-reduced-tp", mesh(1, 4, 2, 2)),
      bug("all_to_all_wrong_order", "all-to-all-wrong-order", mesh(1, 2, 1, 2)),
      bug("all_to_all_dims_swapped", "all-to-all-dims-swapped",
          mesh(1, 2, 1, 2, [](PlanConfig& c) { c.batch = 4; })),
      bug("router_grad_not_synced", "router-grad-not-synced", mesh(2, 2, 1, 2)),
      bug("moe_combine_missing_shared", "moe-combine-missing-shared", mesh(1, 2, 1, 2)),
      bug("zero_allgather_order", "zero-allgather-order",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.zero = 1; })),
      bug("zero3_param_gather_order", "zero3-param-gather-order",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.zero = 3; })),
      bug("expert_grad_not_synced_zero2", "expert-grad-not-synced",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.zero = 2; })),
      bug("clip_norm_missing_ep", "clip-norm-missing-ep",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true; })),
      bug("clip_norm_missing_ep_zero1", "clip-norm-missing-ep",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true, c.zero = 1; })),
      bug("moe_cp_expert_grad_all_slots", "moe-cp-expert-grad-all-slots",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.cp = 2; })),
      bug("moe_sp_dispatch_local_tokens", "moe-sp-dispatch-local-tokens",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })),
      bug("moe_sp_combine_wrong_piece", "moe-sp-combine-wrong-piece",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })),
  };
}

class MoeEtpBug : public ::testing::TestWithParam<BugCase> {};

TEST_P(MoeEtpBug, IsFoundWhereItFirstShows) {
  const BugCase& c = GetParam();
  testing::expect_bug_found_first(planner::generate_plan(kTiny, c.config), "moe-etp-" + c.label);
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeEtpBug, ::testing::ValuesIn(bug_cases()),
                         [](const auto& info) { return info.param.label; });

// DeepSeek-V3's published shapes (256 experts of 128 slots, hidden 7168) at
// 4 layers (layer 3 is the first MoE layer): dp2 tp2 etp1 ep4 pp2 with 2
// micro-batches verifies equivalent; on tp2 etp1 ep2 the unsplit tokens are
// found at l3.moe.xin.
TEST(DeepseekV3Etp, PublishedShapesEquivalentAndUnsplitTokensFound) {
  PlanConfig c = testing::transformer_config(4, 2, 2, 2, 2);
  c.etp = 1;
  c.ep = 4;
  Report r = testing::verify_json(planner::generate_plan("deepseek-v3", c), "deepseek-etp");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  c = testing::transformer_config(4, 1, 2, 1, 1);
  c.etp = 1;
  c.ep = 2;
  c.bug = "etp-tokens-not-split";
  const json plan = planner::generate_plan("deepseek-v3", c);
  EXPECT_EQ(plan["meta"]["bug_first_tensor"], "l3.moe.xin");
  testing::expect_bug_found_first(plan, "deepseek-etp-bug");
}

// What is not written is refused by name, with the usage exit status.
class MoeEtpCli : public testing::ScratchDirTest {
 protected:
  MoeEtpCli() : ScratchDirTest("shardproof_moe_etp_") {}
  void expect_refused(const std::string& args, const std::string& words) {
    const testing::CliResult r = testing::run_cli("plan " + args, dir_ / "stderr.txt");
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_NE(r.err.find(words), std::string::npos) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args;
  }
};

TEST_F(MoeEtpCli, RefusesWhatIsNotWritten) {
  expect_refused("moe-tiny --tp 2 --etp 3", "--etp (3) must divide tp (2)");
  expect_refused("llama3-tiny --tp 2 --etp 1", "--etp applies to MoE models only");
  expect_refused("moe-tiny --tp 2 --etp 1 --ep 3", "ep (3) must divide dp * tp / etp (2)");
  expect_refused("moe-tiny --tp 2 --etp 1 --batch 1",
                 "tp / etp (2) must divide the sequences per dp rank and micro-batch (1)");
  expect_refused("moe-tiny --dp 2 --tp 2 --etp 1 --zero 1 --cp 2",
                 "--etp 1 below tp 2: --zero with --cp is not supported");
  expect_refused("moe-tiny --tp 2 --etp 1 --ep 2 --compact --bug etp-split-gather-reversed",
                 "--compact does not support --bug etp-split-gather-reversed");
}

TEST_F(MoeEtpCli, RefusesBugsWhereTheyCannotApply) {
  expect_refused("moe-tiny --tp 2 --bug etp-tokens-not-split", "needs --etp below tp");
  expect_refused("moe-tiny --dp 2 --ep 2 --bug etp-expert-grad-on-dp-group",
                 "needs --etp below tp");
  // ep = tp / etp: the edp group is the dp group, nothing to find.
  expect_refused("moe-tiny --dp 2 --tp 2 --etp 1 --ep 2 --bug etp-expert-grad-on-dp-group",
                 "needs dp >= 2, ep != tp / etp, zero 0");
  expect_refused("moe-tiny --tp 2 --etp 1 --ep 2 --bug etp-expert-grad-on-dp-group",
                 "needs dp >= 2");
  expect_refused("moe-tiny --tp 2 --etp 1 --ep 2 --bug expert-out-not-reduced-tp",
                 "needs etp >= 2");
  expect_refused("moe-tiny --tp 2 --etp 1 --ep 2 --bug expert-grad-not-synced",
                 "needs edp = dp * tp / (etp * ep) >= 2");
  expect_refused("moe-tiny --dp 4 --tp 2 --etp 1 --ep 2 --bug expert-grad-on-dp-group",
                 "written for etp = tp only");
}

}  // namespace
}  // namespace shardproof
