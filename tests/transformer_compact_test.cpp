// The compact form of the transformer plans (llama3-*): its expansion is the
// v1 plan the planner writes (same tensors, ops, claims, groups, attributes),
// both verify alike, the file does not grow with dp, tp or micro-batches, and
// the flags the compact form does not support yet are refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <tuple>

#include "engine/format/plan_parser.h"
#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/graph_text.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using testing::compact;
using testing::expect_same_plan;

using testing::first_finding;
using testing::parse;

planner::PlanConfig tiny(int layers, int dp, int tp, int pp, int mb, bool adam = true) {
  planner::PlanConfig c = testing::transformer_config(layers, dp, tp, pp, mb);
  c.optimizer = adam ? "adam" : "sgd";
  return c;
}

// Every dp, tp, pp and micro-batch count in {1, 2} on one and two layers,
// sgd and adam alternating.
TEST(TransformerCompact, ExpansionIsTheV1PlanOverTheMatrix) {
  for (int layers : {1, 2})
    for (int dp : {1, 2})
      for (int tp : {1, 2})
        for (int pp : {1, 2})
          for (int mb : {1, 2}) {
            if (pp > layers) continue;
            expect_same_plan("llama3-tiny", tiny(layers, dp, tp, pp, mb, (dp + tp + mb) % 2));
          }
}

// Degrees of 3 and 4, uneven pipeline stages, a long accumulation chain.
TEST(TransformerCompact, ExpansionIsTheV1PlanBeyondTwo) {
  expect_same_plan("llama3-tiny", tiny(2, 3, 2, 2, 3));
  expect_same_plan("llama3-tiny", tiny(2, 4, 1, 1, 4, false));
  expect_same_plan("llama3-tiny", tiny(2, 1, 2, 2, 4));
  expect_same_plan("llama3-tiny", tiny(4, 2, 2, 3, 3));
  expect_same_plan("llama3-tiny", tiny(5, 1, 1, 4, 2, false));
  // A published shape's own heads and kv heads (tp 4 <= 8 kv heads).
  planner::PlanConfig c = tiny(2, 2, 4, 2, 2);
  c.seq = 4;
  expect_same_plan("llama3-8b", c);
}

// The options written with tp-rank conditions: only tp rank 0 adds the bias;
// the residual round trip slices at tp-dependent offsets.
TEST(TransformerCompact, ExpansionIsTheV1PlanWithOptions) {
  for (int tp : {1, 2}) {
    planner::PlanConfig c = tiny(2, 2, tp, 2, 2);
    c.bias = true;
    expect_same_plan("llama3-tiny", c);
  }
  planner::PlanConfig c = tiny(2, 2, 2, 1, 3);
  c.reshard_residual = true;
  expect_same_plan("llama3-tiny", c);
  // Tied embeddings on one stage: two gradient contributions per
  // micro-batch (the LM head's, then the lookup's) in one chain.
  for (int mb : {1, 2, 3}) {
    planner::PlanConfig t = tiny(2, 2, 2, 1, mb, mb != 2);
    t.tie_embeddings = true;
    expect_same_plan("llama3-tiny", t);
    t.dp = 1;
    t.batch = 0;
    expect_same_plan("llama3-tiny", t);
  }
}

// Sequence parallelism (reduce-scatter and all-gather over tp, the norm
// weights' gradients summed over tp), context parallelism (K/V gathered and
// their gradients reduce-scattered over cp, dp x cp gradient groups) and
// ZeRO (shards of dim 0 over dp x cp).
TEST(TransformerCompact, ExpansionIsTheV1PlanWithSpCpAndZero) {
  for (int pp : {1, 2})
    for (int mb : {1, 3}) {
      planner::PlanConfig c = tiny(2, 2, 2, pp, mb, mb == 1);
      c.sp = true;
      expect_same_plan("llama3-tiny", c);
      for (int zero : {1, 2}) {
        planner::PlanConfig z = tiny(2, 2, pp == 1 ? 1 : 2, pp, mb, mb == 3);
        z.zero = zero;
        expect_same_plan("llama3-tiny", z);
        z.sp = z.tp > 1;
        expect_same_plan("llama3-tiny", z);
      }
      for (int cp : {2, 4}) {
        planner::PlanConfig x = tiny(2, 2, 2, pp, mb, mb == 1);
        x.cp = cp;
        expect_same_plan("llama3-tiny", x);
        x.sp = cp == 2;
        x.zero = 1 + mb % 2;
        expect_same_plan("llama3-tiny", x);
      }
    }
  planner::PlanConfig c = tiny(2, 2, 2, 2, 2);
  c.sp = true;
  c.cp = 2;
  c.zero = 1;
  c.bias = true;
  Report a = testing::verify_json(planner::generate_plan("llama3-tiny", c), "v1");
  Report b = testing::verify_json(planner::generate_plan("llama3-tiny", compact(c)), "compact");
  EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::Equivalent) << testing::explain(b);
}

// Options together, drawn from a fixed sequence: layers 1..5, every degree
// up to 3 or 4 where the tiny model allows it, sp, cp, ZeRO, bias, the
// residual round trip, tied embeddings on one stage, and the bugs that
// apply. Each configuration the planner accepts in both forms must expand
// to its v1 plan.
TEST(TransformerCompact, ExpansionIsTheV1PlanForMixedOptions) {
  std::vector<std::string> bugs = {""};
  for (const planner::BugInfo& b : planner::list_bugs("llama3-tiny")) bugs.push_back(b.name);
  uint64_t state = 12345;
  auto pick = [&](int n) {  // a small LCG: the same draws on every run
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return int((state >> 33) % uint64_t(n));
  };
  int compared = 0;
  for (int draw = 0; draw < 400 && compared < 40; ++draw) {
    planner::PlanConfig c =
        tiny(1 + pick(5), 1 + pick(3), 1 + pick(2), 1 + pick(3), 1 + pick(4), pick(2) == 0);
    c.cp = pick(3) == 0 ? 2 : 1;
    c.sp = c.tp > 1 && pick(2) == 0;
    c.zero = pick(3);
    c.bias = pick(3) == 0;
    c.reshard_residual = c.tp > 1 && !c.sp && pick(4) == 0;
    c.tie_embeddings = c.pp == 1 && pick(4) == 0;
    c.bug = bugs[size_t(pick(int(bugs.size())))];
    try {
      planner::generate_plan("llama3-tiny", compact(c));
    } catch (const std::invalid_argument&) {
      continue;  // the configuration does not fit, or the compact form refuses it
    }
    expect_same_plan("llama3-tiny", c);
    ++compared;
  }
  EXPECT_EQ(compared, 40);
}

// Both forms verify to the same verdict and the same number of findings.
TEST(TransformerCompact, SameVerdictAsV1) {
  for (const planner::PlanConfig& c :
       {tiny(2, 2, 2, 2, 2), tiny(2, 1, 2, 1, 3, false), tiny(2, 2, 1, 2, 1)}) {
    Report a = testing::verify_json(planner::generate_plan("llama3-tiny", c), "v1");
    Report b = testing::verify_json(planner::generate_plan("llama3-tiny", compact(c)), "compact");
    EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
    EXPECT_EQ(b.verdict, Verdict::Equivalent) << testing::explain(b);
    EXPECT_EQ(a.findings.size(), b.findings.size());
  }
}

std::vector<std::string> all_findings(const Report& r) {
  std::vector<std::string> out;
  for (const Finding& f : r.findings)
    out.push_back(f.kind + " | " + f.stage.substr(f.stage.find(": ") + 2) + " | " + f.tensor);
  std::sort(out.begin(), out.end());
  return out;
}

// A bug limited to some ranks or micro-batches is the buggy template under
// a condition beside the correct one under the rest: the expansion is the
// v1 plan, and the verifier's first finding is v1's. Each bug runs in the
// smallest configuration it applies to, with two micro-batches so that its
// condition names the micro-batch too. The bugs of the flags the compact
// form does not support yet are refused with the flag's name.
// One test per bug, so each has its own time budget and ctest runs them side by side.
class CompactLlamaBug : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> llama_tiny_bug_names() {
  std::vector<std::string> names;
  for (const planner::BugInfo& bug : planner::list_bugs("llama3-tiny")) names.push_back(bug.name);
  return names;
}

TEST_P(CompactLlamaBug, FoundWithTheSameFirstFinding) {
  const std::string name = GetParam();
  std::optional<planner::PlanConfig> found = testing::llama_config_for_bug(name);
  ASSERT_TRUE(found) << name;
  planner::PlanConfig c = *found;
  c.microbatches = 2;
  c.batch = 0;
  try {
    planner::generate_plan("llama3-tiny", compact(c));
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--compact does not support "), std::string::npos)
        << name << ": " << e.what();
    return;
  }
  expect_same_plan("llama3-tiny", *found);
  expect_same_plan("llama3-tiny", c);
  Report a = testing::verify_json(planner::generate_plan("llama3-tiny", c), "v1-bug");
  Report b = testing::verify_json(planner::generate_plan("llama3-tiny", compact(c)), "compact-bug");
  EXPECT_EQ(a.verdict, Verdict::NotEquivalent) << name << "\n" << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << name << "\n" << testing::explain(b);
  EXPECT_EQ(all_findings(a), all_findings(b)) << name;
  // This bug breaks every tp rank's gate or up at the same depth (see its
  // catalogue entry): which comes first follows the op order, rank-major
  // in v1, template-major in the expansion.
  if (name != "fused-gate-up-contiguous") {
    EXPECT_EQ(first_finding(a), first_finding(b)) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBug, CompactLlamaBug, ::testing::ValuesIn(llama_tiny_bug_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

// At least 18 of the catalogue's bugs exist in compact form.
TEST(TransformerCompact, MostBugsHaveACompactForm) {
  int supported = 0;
  for (const std::string& name : llama_tiny_bug_names()) {
    std::optional<planner::PlanConfig> found = testing::llama_config_for_bug(name);
    ASSERT_TRUE(found) << name;
    planner::PlanConfig c = *found;
    c.microbatches = 2;
    c.batch = 0;
    try {
      planner::generate_plan("llama3-tiny", compact(c));
      ++supported;
    } catch (const std::invalid_argument&) {
    }
  }
  EXPECT_GE(supported, 18);
}

// The MoE lockstep step: expert all_to_all over the dp axis (ep == dp),
// experts split over tp, MoE and dense layers on their pipeline stages.
TEST(TransformerCompact, MoeExpansionIsTheV1PlanOverTheMatrix) {
  for (int dp : {1, 2})
    for (int tp : {1, 2})
      for (int pp : {1, 2})
        for (int mb : {1, 2, 3}) {
          planner::PlanConfig c = tiny(2, dp, tp, pp, mb, (dp + tp + mb) % 2);
          c.ep = dp;
          expect_same_plan("moe-tiny", c);
          if (dp == 2 && mb == 2) {
            c.ep = 1;
            expect_same_plan("moe-tiny", c);
          }
        }
}

// Sequence parallelism around the MoE layer (moe_seq.cpp): the gathers
// over tp and the slice of the rank's piece are affine in the tp axis. Under
// cp, and for the sp bugs that keep the next rank's piece, the compact form
// refuses.
TEST(TransformerCompact, MoeSequenceParallelExpansionIsTheV1Plan) {
  for (auto [dp, pp, mb] : {std::tuple{1, 1, 1}, {2, 1, 2}, {1, 2, 2}}) {
    planner::PlanConfig c = tiny(2, dp, 2, pp, mb);
    c.ep = dp, c.sp = true;
    expect_same_plan("moe-tiny", c);
  }
  planner::PlanConfig c = tiny(2, 1, 2, 1, 1);
  c.sp = true;
  c.bug = "sp-allgather-dim";
  expect_same_plan("moe-tiny", c);
  Report r = testing::verify_json(planner::generate_plan("moe-tiny", compact(c)), "compact-sp");
  EXPECT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  for (const char* bug : {"moe-sp-dispatch-local-tokens", "moe-sp-combine-wrong-piece"}) {
    c.bug = bug;
    EXPECT_THROW(planner::generate_plan("moe-tiny", compact(c)), std::invalid_argument) << bug;
  }
}

// Context parallelism around the MoE layer: the gathers over cp, each cp
// rank's block of slots, and the expert gradients summed over cp (at ep =
// dp) or edp x cp (the expert mesh) are affine in the cp axis. The cp bugs
// that keep another chunk, or pick their rank in the expanded form only, are
// refused.
TEST(TransformerCompact, MoeContextParallelExpansionIsTheV1Plan) {
  for (auto [dp, ep, tp, pp, mb] :
       {std::tuple{1, 1, 1, 1, 1}, {2, 2, 1, 1, 2}, {2, 1, 2, 2, 2}, {4, 2, 1, 1, 1}}) {
    planner::PlanConfig c = tiny(2, dp, tp, pp, mb);
    c.ep = ep, c.cp = 2;
    expect_same_plan("moe-tiny", c);
  }
  planner::PlanConfig c = tiny(2, 2, 2, 1, 1);
  c.ep = 2, c.cp = 2, c.sp = true, c.zero = 1;
  expect_same_plan("moe-tiny", c);
  c.zero = 0;
  c.bug = "cp-kv-grad-not-reduced";
  expect_same_plan("moe-tiny", c);
  for (const char* bug : {"moe-cp-dispatch-local-chunk", "moe-cp-combine-wrong-chunk",
                          "moe-cp-expert-grad-all-slots"}) {
    c.bug = bug;
    EXPECT_THROW(planner::generate_plan("moe-tiny", compact(c)), std::invalid_argument) << bug;
  }
}

// Every bug of moe-tiny (the dense ones in the MoE lockstep, and the MoE
// ones) in the first of a few configurations it applies to: the expansion
// is the v1 plan; the MoE bugs are found alike. The all_to_all in reverse
// member order is refused by name.
TEST(TransformerCompact, MoeBugs) {
  std::vector<std::string> dense;
  for (const planner::BugInfo& b : planner::list_bugs("llama3-tiny")) dense.push_back(b.name);
  int supported = 0;
  for (const planner::BugInfo& bug : planner::list_bugs("moe-tiny")) {
    std::optional<planner::PlanConfig> found;
    for (auto [tp, ep, pp] : {std::tuple{2, 2, 1}, {2, 1, 1}, {1, 2, 2}}) {
      planner::PlanConfig c = tiny(2, 2, tp, pp, 2);
      c.ep = ep;
      c.bug = bug.name;
      try {
        planner::bug_first_tensor("moe-tiny", c);
        found = c;
        break;
      } catch (const std::invalid_argument&) {
      }
    }
    if (!found) continue;  // needs a flag MoE models do not take (sp, cp, ...)
    try {
      planner::generate_plan("moe-tiny", compact(*found));
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--compact does not support "), std::string::npos)
          << bug.name << ": " << e.what();
      continue;
    }
    ++supported;
    expect_same_plan("moe-tiny", *found);
    if (std::find(dense.begin(), dense.end(), bug.name) != dense.end()) continue;
    Report a = testing::verify_json(planner::generate_plan("moe-tiny", *found), "v1-bug");
    Report b =
        testing::verify_json(planner::generate_plan("moe-tiny", compact(*found)), "compact-bug");
    EXPECT_EQ(b.verdict, Verdict::NotEquivalent) << bug.name << "\n" << testing::explain(b);
    EXPECT_EQ(first_finding(a), first_finding(b)) << bug.name;
    EXPECT_EQ(all_findings(a), all_findings(b)) << bug.name;
  }
  EXPECT_GE(supported, 18);
  planner::PlanConfig c = tiny(2, 2, 1, 1, 1);
  c.ep = 2;
  c.bug = "all-to-all-wrong-order";
  c.compact = true;
  EXPECT_THROW(planner::generate_plan("moe-tiny", c), std::invalid_argument);
}

nlohmann::json compact_8b(int dp, int tp, int pp, int mb) {
  planner::PlanConfig c = tiny(4, dp, tp, pp, mb);
  c.seq = 8;
  return planner::generate_plan("llama3-8b", compact(c));
}

// Templates per program: the structure, apart from digits.
std::vector<size_t> templates(const nlohmann::json& plan) {
  std::vector<size_t> n;
  for (const auto& p : plan["parallel"]["programs"]) {
    n.push_back(p["tensors"].size());
    n.push_back(p["ops"].size());
  }
  return n;
}

size_t size_of(const nlohmann::json& plan) {
  return plan["parallel"].dump(1).size();
}

// The parallel graph does not grow with dp, tp or micro-batches: the same
// templates, and a size that differs by digits only. From 3 micro-batches
// on the accumulation chain has all its links (first, middle, last), and
// from tp 2 on the loss has its tp-rank-0 condition, so those are the
// reference.
TEST(TransformerCompact, SizeDoesNotDependOnDpTpOrMicrobatches) {
  auto near = [](size_t a, size_t b) { return (a > b ? a - b : b - a) * 100 <= a; };  // 1%
  const nlohmann::json ref = compact_8b(2, 2, 2, 4);
  for (const nlohmann::json& other : {compact_8b(64, 2, 2, 4), compact_8b(2, 8, 2, 4),
                                      compact_8b(2, 2, 2, 16), compact_8b(64, 8, 2, 16)}) {
    EXPECT_PRED2(near, size_of(ref), size_of(other)) << other["name"];
    EXPECT_EQ(templates(ref), templates(other)) << other["name"];
  }
  // One program per pipeline stage: pp grows it, in proportion.
  EXPECT_EQ(templates(compact_8b(2, 2, 4, 4)).size(), 8u);
}

nlohmann::json compact_deepseek(int dp, int tp, int mb) {
  planner::PlanConfig c = tiny(4, dp, tp, 2, mb);
  c.ep = dp;
  c.seq = 8;
  return planner::generate_plan("deepseek-v3", compact(c));
}

// The same for an MoE model with its experts over dp (ep == dp).
TEST(TransformerCompact, MoeSizeDoesNotDependOnDpTpOrMicrobatches) {
  auto near = [](size_t a, size_t b) { return (a > b ? a - b : b - a) * 100 <= a; };  // 1%
  const nlohmann::json ref = compact_deepseek(2, 2, 4);
  for (const nlohmann::json& other :
       {compact_deepseek(32, 2, 4), compact_deepseek(2, 8, 4), compact_deepseek(32, 8, 16)}) {
    EXPECT_PRED2(near, size_of(ref), size_of(other)) << other["name"];
    EXPECT_EQ(templates(ref), templates(other)) << other["name"];
  }
}

void expect_refused(const planner::PlanConfig& c, const std::string& flag) {
  testing::expect_compact_refused("llama3-tiny", c, flag);
}

TEST(TransformerCompact, UnsupportedFlagsAreRefusedByName) {
  planner::PlanConfig c = tiny(2, 2, 1, 1, 1);
  c.cp = 2;
  c.bug = "cp-kv-allgather-order";
  expect_refused(c, "--bug cp-kv-allgather-order");
  c = tiny(2, 2, 1, 1, 1);
  c.zero = 1;
  c.bug = "zero-allgather-order";
  expect_refused(c, "--bug zero-allgather-order");
  c = tiny(2, 1, 1, 2, 1);
  c.tie_embeddings = true;
  expect_refused(c, "--tie-embeddings with pp > 1");
  expect_refused(tiny(2, 1, 4, 1, 1), "tp (4) above the kv heads (2)");
  c = tiny(2, 1, 2, 1, 1);
  c.reshard_residual = true;
  c.bug = "reshard-gather-order";
  expect_refused(c, "--bug reshard-gather-order");
}

// The frontier plan: Llama-3 405B at full depth on 8,192 devices with 16
// micro-batches is written in a moment, without expanding anything.
TEST(TransformerCompact, Llama405bOn8192DevicesIsWrittenInAMoment) {
  planner::PlanConfig c = testing::transformer_config(0, 64, 8, 16, 16);
  c.compact = true;
  auto start = std::chrono::steady_clock::now();
  nlohmann::json plan = planner::generate_plan("llama3-405b", c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(plan["meta"]["layers"], 126);
  // Stage 0, the run of stages 1..13 folded into one (8 layers each), and
  // stages 14 and 15 (7 layers each).
  EXPECT_EQ(plan["parallel"]["programs"].size(), 4u);
  EXPECT_LT(seconds, 30);
  EXPECT_LT(plan.dump().size(), size_t(64) << 20);
}

// DeepSeek-V3 at full depth, experts over 32 dp ranks, 8 stages.
TEST(TransformerCompact, DeepSeekV3On2048DevicesIsWrittenInAMoment) {
  planner::PlanConfig c = testing::transformer_config(0, 32, 8, 8, 16);
  c.ep = 32;
  c.compact = true;
  auto start = std::chrono::steady_clock::now();
  nlohmann::json plan = planner::generate_plan("deepseek-v3", c);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(plan["meta"]["layers"], 61);
  // Stages 1..4 folded into one; stages 5 and 6 are alike too, but a run
  // of two gains nothing (two corners either way) and stays two programs.
  EXPECT_EQ(plan["parallel"]["programs"].size(), 5u);
  EXPECT_LT(seconds, 30);
}

}  // namespace
}  // namespace shardproof
