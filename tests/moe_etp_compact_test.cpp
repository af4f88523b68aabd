// Megatron's expert mesh with expert tensor parallelism below tp (--etp) in
// the compact form. The tp rank t = j * etp + k (token split j, etp rank k)
// and, where ep spans several dp ranks, the dp rank are written as mesh axes
// (planner/transformer_mesh.h) so that the expert-dp index q = d * tp / etp
// + j has its ep rank q % ep and edp rank q / ep as mixed-radix numbers:
//
//   ep | tp / etp:  dp | tp (j / ep), ep, etp     ep rank ep, edp dp*(tp/etp/ep) + tp
//   tp / etp | ep:  dp (d / r), ep (r) | tp (j), etp    ep rank ep*(tp/etp) + tp, edp dp
//
// (r = ep / (tp / etp)). Every group is a set of axes; the expansion is the
// v1 plan rank for rank; per coordinate class the verdict is the v1 plan's,
// correct and with each bug of that mesh the compact form writes; the rest
// is refused by name.
//
// moe-tiny (2 kv heads: the compact form takes tp <= 2) has tp 2 etp 1, so
// no etp axis: DeepSeek-V3 at 4 layers (layer 3 MoE) covers etp >= 2 and
// ep dividing tp / etp with both a tp and an ep axis.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "planner/planner.h"
#include "planner/transformer.h"
#include "tests/compact_support.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::by_classes;
using testing::compact;
using testing::expect_compact_refused;
using testing::expect_same_plan;

using nlohmann::json;
using planner::PlanConfig;

const char* const kTiny = "moe-tiny";
const char* const kDeepseek = "deepseek-v3";

PlanConfig mesh(int dp, int tp, int etp, int ep, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = testing::transformer_config(2, dp, tp, 1, 1);
  c.etp = etp;
  c.ep = ep;
  if (edit) edit(c);
  return c;
}

// DeepSeek-V3's published shapes at 4 layers (layer 3 is its first MoE layer).
PlanConfig deepseek(int dp, int tp, int etp, int ep, void (*edit)(PlanConfig&) = nullptr) {
  PlanConfig c = mesh(dp, tp, etp, ep, edit);
  c.layers = 4;
  return c;
}

// ep 1 (edp dp*2 + tp), ep = tp / etp (edp dp, a tp axis of size 1), ep 4
// over two dp ranks (ep rank ep*2 + tp), with the options v1 writes under
// --etp.
TEST(MoeEtpCompact, ExpansionIsTheV1Plan) {
  for (int ep : {1, 2, 4})
    for (int mb : {1, 2})
      for (int pp : {1, 2}) {
        PlanConfig c = mesh(ep == 4 ? 4 : 2, 2, 1, ep);
        c.microbatches = mb, c.pp = pp;
        c.optimizer = (ep + mb + pp) % 2 ? "adam" : "sgd";
        expect_same_plan(kTiny, c);
      }
  expect_same_plan(kTiny, mesh(2, 2, 1, 4));  // ep 4 of dp 2: the dp axis has size 1
  expect_same_plan(kTiny, mesh(1, 2, 1, 2));
  expect_same_plan(kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.batch = 8; }));
  for (int zero : {1, 2, 3}) {
    PlanConfig c = mesh(2, 2, 1, 2);
    c.zero = zero, c.microbatches = 2;
    expect_same_plan(kTiny, c);
    c = mesh(2, 2, 1, 1);
    c.zero = zero;
    expect_same_plan(kTiny, c);
    // ep 4 of moe-tiny's 4 experts leaves no block to shard: DeepSeek-V3 below.
    c = deepseek(2, 4, 2, 4);
    c.zero = zero, c.pp = 2;
    expect_same_plan(kDeepseek, c);
  }
  expect_same_plan(kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true; }));
  expect_same_plan(kTiny, mesh(4, 2, 1, 4, [](PlanConfig& c) { c.clip = true, c.pp = 2; }));
  expect_same_plan(kTiny, mesh(2, 2, 1, 1, [](PlanConfig& c) { c.clip = true, c.zero = 2; }));
  expect_same_plan(kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; }));
  expect_same_plan(kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.cp = 2; }));
  expect_same_plan(kTiny, mesh(2, 2, 1, 4, [](PlanConfig& c) { c.cp = 2, c.sp = true; }));
  expect_same_plan(kTiny, mesh(1, 2, 1, 2, [](PlanConfig& c) {
                     c.layers = 4, c.pp = 2, c.vpp = 2, c.microbatches = 2;
                   }));
}

// An etp axis, and ep dividing tp / etp with both a tp and an ep axis: at
// DeepSeek-V3's shapes (tp up to its 128 kv heads).
TEST(MoeEtpCompact, ExpansionIsTheV1PlanWithAnEtpAxis) {
  expect_same_plan(kDeepseek, deepseek(1, 4, 2, 2));  // tp (1), ep, etp
  expect_same_plan(kDeepseek, deepseek(2, 4, 1, 2));  // tp (2), ep
  expect_same_plan(kDeepseek, deepseek(1, 8, 2, 2, [](PlanConfig& c) { c.microbatches = 2; }));
  expect_same_plan(kDeepseek, deepseek(2, 4, 2, 1, [](PlanConfig& c) { c.clip = true; }));
  expect_same_plan(kDeepseek, deepseek(1, 4, 2, 2, [](PlanConfig& c) { c.sp = true, c.pp = 2; }));
}

json op_group(const json& plan, const std::string& name) {
  for (const json& prog : plan["parallel"]["programs"])
    for (const json& op : prog["ops"])
      if (op.value("name", "") == name) return op["group"];
  ADD_FAILURE() << "no op template " << name;
  return json();
}

// The mesh and the groups of the expert mesh, as the compact file says them.
TEST(MoeEtpCompact, GroupsAreSetsOfAxes) {
  // dp4 tp2 etp1 ep4: ep 4 spans two dp ranks: d = dp*2 + ep, ep rank ep*2 + tp.
  json plan = planner::generate_plan(kTiny, compact(mesh(4, 2, 1, 4)));
  EXPECT_EQ(plan["parallel"]["mesh"]["axes"],
            json::parse(R"([["pp",1],["dp",2],["ep",2],["tp",2]])"));
  EXPECT_EQ(op_group(plan, "dp{dp*2}.tp0.pp0.mb{mb}.l1.moe.xin.ep_dispatch"), json({"ep", "tp"}));
  EXPECT_EQ(op_group(plan, "dp{ep}.tp{tp}.pp0.grad.l1.moe.wg.dp_all_reduce"), json({"dp"}));
  EXPECT_EQ(op_group(plan, "dp{dp*2 + ep}.tp0.pp0.mb{mb}.l1.moe.out.split_all_gather"),
            json({"tp"}));
  EXPECT_EQ(op_group(plan, "dp0.tp{tp}.pp0.grad.l1.moe.wsg.dp_all_reduce"), json({"dp", "ep"}));

  // dp2 tp2 etp1 ep1: every rank is an edp index dp*2 + tp.
  plan = planner::generate_plan(kTiny, compact(mesh(2, 2, 1, 1)));
  EXPECT_EQ(plan["parallel"]["mesh"]["axes"], json::parse(R"([["pp",1],["dp",2],["tp",2]])"));
  EXPECT_EQ(op_group(plan, "dp0.tp0.pp0.grad.l1.moe.wg.dp_all_reduce"), json({"dp", "tp"}));

  // DeepSeek-V3 tp8 etp2 ep2: t = tp*4 + ep*2 + etp; ep rank ep, edp tp.
  plan = planner::generate_plan(kDeepseek, compact(deepseek(1, 8, 2, 2)));
  EXPECT_EQ(plan["parallel"]["mesh"]["axes"],
            json::parse(R"([["pp",1],["dp",1],["tp",2],["ep",2],["etp",2]])"));
  EXPECT_EQ(op_group(plan, "dp{dp}.tp{etp + tp*4}.pp0.mb{mb}.l3.moe.xin.ep_dispatch"),
            json({"ep"}));
  EXPECT_EQ(op_group(plan, "dp{dp}.tp{ep*2 + tp*4}.pp0.mb{mb}.l3.moe.out.etp_all_reduce"),
            json({"etp"}));
  EXPECT_EQ(op_group(plan, "dp{dp}.tp{etp}.pp0.mb{mb}.l3.moe.out.split_all_gather"),
            json({"tp", "ep"}));
}

// Correct plans: the compact one per coordinate class and the v1 one both
// equivalent. dp 8 has an interior class along dp.
struct Case {
  std::string label;
  std::string model;
  PlanConfig config;
};

class MoeEtpCompactCorrect : public ::testing::TestWithParam<Case> {};

TEST_P(MoeEtpCompactCorrect, EquivalentByClassesAndExpanded) {
  const Case& k = GetParam();
  Report a = testing::verify_json(planner::generate_plan(k.model, k.config), "etp-v1-" + k.label);
  const auto start = std::chrono::steady_clock::now();
  Report b = by_classes(planner::generate_plan(k.model, compact(k.config)));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ timing ] %s per class: %.2f s\n", k.label.c_str(), s);
  EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::Equivalent) << testing::explain(b);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, MoeEtpCompactCorrect,
    ::testing::Values(
        Case{"dp2_tp2_etp1_ep1", kTiny, mesh(2, 2, 1, 1)},
        Case{"dp2_tp2_etp1_ep2_mb2", kTiny,
             mesh(2, 2, 1, 2, [](PlanConfig& c) { c.microbatches = 2; })},
        Case{"dp4_tp2_etp1_ep4_pp2", kTiny, mesh(4, 2, 1, 4, [](PlanConfig& c) { c.pp = 2; })},
        Case{"dp2_tp2_etp1_ep1_zero2", kTiny, mesh(2, 2, 1, 1, [](PlanConfig& c) { c.zero = 2; })},
        Case{"dp2_tp2_etp1_ep2_zero3", kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.zero = 3; })},
        Case{"dp2_tp2_etp1_ep2_clip", kTiny,
             mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true; })},
        Case{"dp2_tp2_etp1_ep2_sp", kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.sp = true; })},
        Case{"dp2_tp2_etp1_ep2_cp2", kTiny, mesh(2, 2, 1, 2, [](PlanConfig& c) { c.cp = 2; })},
        // An interior class: the dp axis of size 8.
        Case{"dp8_tp2_etp1_ep2", kTiny, mesh(8, 2, 1, 2)},
        Case{"dp8_tp2_etp1_ep4", kTiny, mesh(8, 2, 1, 4)}),
    [](const auto& info) { return info.param.label; });

// Each bug the compact form writes on this mesh: found per coordinate class
// first at its tensor, as in the v1 plan.
struct BugCase {
  std::string label;
  std::string bug;
  PlanConfig config;
  std::string model = kTiny;
};

class MoeEtpCompactBug : public ::testing::TestWithParam<BugCase> {};

TEST_P(MoeEtpCompactBug, FoundAtItsTensorAsInTheV1Plan) {
  PlanConfig c = GetParam().config;
  const std::string& model = GetParam().model;
  c.bug = GetParam().bug;
  expect_same_plan(model, c);
  const json plan = planner::generate_plan(model, compact(c));
  Report a = testing::verify_json(planner::generate_plan(model, c), "etp-v1-" + GetParam().label);
  Report b = by_classes(plan);
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  EXPECT_EQ(b.findings[0].kind, "mismatch") << testing::explain(b);
  EXPECT_EQ(b.findings[0].tensor, plan["meta"]["bug_first_tensor"]) << testing::explain(b);
  EXPECT_EQ(testing::first_finding(a), testing::first_finding(b));
}

std::vector<BugCase> bug_cases() {
  auto bug = [](const char* label, const char* name, PlanConfig c) {
    return BugCase{label, name, c};
  };
  return {
      // The bugs of this mesh (etp-split-gather-reversed is refused).
      bug("tokens_not_split", "etp-tokens-not-split", mesh(2, 2, 1, 2)),
      bug("tokens_not_split_ep4", "etp-tokens-not-split", mesh(4, 2, 1, 4)),
      bug("expert_grad_on_dp_group_ep1", "etp-expert-grad-on-dp-group", mesh(2, 2, 1, 1)),
      bug("expert_grad_on_dp_group_ep4", "etp-expert-grad-on-dp-group", mesh(2, 2, 1, 4)),
      bug("expert_grad_on_dp_group_sp", "etp-expert-grad-on-dp-group",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.sp = true; })),
      bug("expert_grad_on_dp_group_cp2", "etp-expert-grad-on-dp-group",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.cp = 2; })),
      // MoE bugs that apply on this mesh.
      bug("vpp_send_wrong_chunk", "vpp-send-wrong-chunk",
          mesh(1, 2, 1, 2,
               [](PlanConfig& c) { c.layers = 4, c.pp = 2, c.vpp = 2, c.microbatches = 2; })),
      bug("expert_grad_not_synced", "expert-grad-not-synced", mesh(1, 2, 1, 1)),
      bug("expert_grad_not_synced_ep4", "expert-grad-not-synced", mesh(4, 2, 1, 4)),
      bug("expert_grad_averaged_over_edp", "expert-grad-averaged-over-edp", mesh(2, 2, 1, 2)),
      bug("all_to_all_dims_swapped", "all-to-all-dims-swapped",
          mesh(1, 2, 1, 2, [](PlanConfig& c) { c.batch = 4; })),
      bug("router_grad_not_synced", "router-grad-not-synced", mesh(2, 2, 1, 2)),
      bug("moe_combine_missing_shared", "moe-combine-missing-shared", mesh(1, 2, 1, 2)),
      bug("expert_grad_not_synced_zero2", "expert-grad-not-synced",
          mesh(2, 2, 1, 1, [](PlanConfig& c) { c.zero = 2; })),
      bug("clip_norm_missing_ep", "clip-norm-missing-ep",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true; })),
      bug("clip_norm_missing_ep_zero1", "clip-norm-missing-ep",
          mesh(2, 2, 1, 2, [](PlanConfig& c) { c.clip = true, c.zero = 1; })),
      bug("dp_grad_not_synced", "dp-grad-not-synced", mesh(2, 2, 1, 2)),
  };
}

INSTANTIATE_TEST_SUITE_P(Tiny, MoeEtpCompactBug, ::testing::ValuesIn(bug_cases()),
                         [](const auto& info) { return info.param.label; });

// The expert ffn split over etp 2 (tp 4): its two reduction bugs, at
// DeepSeek-V3's shapes.
INSTANTIATE_TEST_SUITE_P(
    DeepseekV3, MoeEtpCompactBug,
    ::testing::Values(BugCase{"expert_out_not_reduced_etp", "expert-out-not-reduced-tp",
                              deepseek(1, 4, 2, 2), kDeepseek},
                      BugCase{"expert_grad_not_reduced_etp", "expert-grad-not-reduced-tp",
                              deepseek(1, 4, 2, 2), kDeepseek}),
    [](const auto& info) { return info.param.label; });

// DeepSeek-V3's published shapes at 4 layers on tp8 etp2 ep2 (t = tp*4 +
// ep*2 + etp) and dp2 tp4 etp2 ep4 (d = ep, t = tp*2 + etp, ep rank
// ep*2 + tp), compact, per coordinate class: equivalent; the unsplit tokens
// found at l3.moe.xin.
TEST(DeepseekV3EtpCompact, PublishedShapesEquivalentAndUnsplitTokensFound) {
  for (const PlanConfig& c : {deepseek(1, 8, 2, 2), deepseek(2, 4, 2, 4)}) {
    const auto start = std::chrono::steady_clock::now();
    Report r = by_classes(planner::generate_plan(kDeepseek, compact(c)));
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ timing ] deepseek-v3 dp%d tp%d etp%d ep%d per class: %.2f s\n", c.dp, c.tp,
                c.etp, c.ep, s);
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  }
  PlanConfig c = deepseek(1, 8, 2, 2);
  c.bug = "etp-tokens-not-split";
  const Report r = by_classes(planner::generate_plan(kDeepseek, compact(c)));
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].tensor, "l3.moe.xin") << testing::explain(r);
}

// What the compact form cannot write on this mesh is refused by name: a
// group in reverse order (the compact form orders members by their
// coordinates), the MoE sp and cp bugs of the next rank's piece, and an ep
// rank that is no number over axes.
TEST(MoeEtpCompact, RefusesWhatItCannotWrite) {
  for (const char* bug : {"etp-split-gather-reversed", "all-to-all-wrong-order"})
    expect_compact_refused(
        kTiny,
        [&] {
          PlanConfig c = mesh(2, 2, 1, 2);
          c.bug = bug;
          return c;
        }(),
        "--bug " + std::string(bug));
  for (const char* bug : {"moe-sp-dispatch-local-tokens", "moe-sp-combine-wrong-piece"})
    expect_compact_refused(
        kTiny,
        [&] {
          PlanConfig c = mesh(2, 2, 1, 2, [](PlanConfig& k) { k.sp = true; });
          c.bug = bug;
          return c;
        }(),
        "--bug " + std::string(bug));
  PlanConfig cp = mesh(2, 2, 1, 2, [](PlanConfig& k) { k.cp = 2; });
  cp.bug = "moe-cp-expert-grad-all-slots";
  expect_compact_refused(kTiny, cp, "--bug moe-cp-expert-grad-all-slots");

  // tp / etp 3 and ep 2: q % 2 of q = d*3 + j is no number over d's and
  // j's digits. No published shape reaches it (heads and experts are powers
  // of two): a six-head model shows it.
  planner::transformer::ModelShape six = {"moe-six", 2, 24, 6, 6, 48, 24, 8, 6};
  six.experts = 4, six.capacity = 4, six.expert_ffn = 12, six.shared_ffn = 24, six.first_dense = 1;
  PlanConfig c = mesh(2, 6, 2, 2);
  c.batch = 6, c.compact = true;
  const planner::transformer::Layout layout(six, c);
  EXPECT_EQ(planner::transformer::compact_unsupported(layout),
            "--etp 2 below tp 6 with ep (2) neither dividing nor a multiple of tp / etp (3)");
}

}  // namespace
}  // namespace shardproof
