// Scaled claims ("scale" in "of"): a parallel tensor that is c x a logical
// slice, part or restricted sum. Data parallelism is the case they exist
// for: each rank's loss is a mean over its own rows, so every backward
// tensor of a rank is dp x its logical slice until the gradients are
// all-reduced and averaged.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/stage/canonical.h"
#include "engine/stage/stage.h"
#include "engine/verifier.h"
#include "tests/graph_text.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

enum class Bug {
  kNone,
  kNoAveraging,          // the all-reduced gradient is used without dividing by dp
  kWrongScaleClaim,      // the local output gradient claims 3 x its slice (it is 2 x)
  kUnscaledLocalClaims,  // the local gradients claim no scale at all
};

json tensor(const json& shape, int rank = -1, json of = nullptr) {
  json t = {{"shape", shape}, {"dtype", "f32"}};
  if (rank >= 0) t["rank"] = rank;
  if (!of.is_null()) t["of"] = std::move(of);
  return t;
}

// One SGD step of y = x @ w under an MSE loss, B = 4*dp rows, on one device
// and over dp ranks: rank r holds rows 4r..4r+3 and a replica of w. Its local
// mean makes dh_r = dp x dh[rows] and dw_r = dp x dw over its rows; the
// all-reduce sums them to dp x dw; dividing by dp gives dw.
json ddp_plan(int dp, Bug bug, const std::string& scale_text = "") {
  const int rows = 4 * dp;
  json ltensors = {{"x", tensor({rows, 4})},     {"w", tensor({4, 3})},   {"t", tensor({rows, 3})},
                   {"h", tensor({rows, 3})},     {"d", tensor({rows, 3})}, {"dh", tensor({rows, 3})},
                   {"dw", tensor({4, 3})},       {"w_new", tensor({4, 3})}};
  const std::string mse = "2/" + std::to_string(rows * 3);
  json lops = json::array(
      {{{"name", "fwd"}, {"op", "matmul"}, {"in", {"x", "w"}}, {"out", {"h"}}},
       {{"name", "diff"}, {"op", "sub"}, {"in", {"h", "t"}}, {"out", {"d"}}},
       {{"name", "mse_grad"}, {"op", "scale"}, {"in", {"d"}}, {"out", {"dh"}},
        {"attrs", {{"factor", mse}}}},
       {{"name", "wgrad"}, {"op", "matmul"}, {"in", {"x", "dh"}}, {"out", {"dw"}},
        {"attrs", {{"transpose_a", true}}}},
       {{"name", "sgd"}, {"op", "sgd"}, {"in", {"w", "dw"}}, {"out", {"w_new"}},
        {"attrs", {{"lr", "1/10"}}}}});
  json logical = {{"tensors", ltensors},
                  {"inputs", {"x", "w", "t"}},
                  {"ops", lops},
                  {"outputs", {"w_new"}}};

  json scale = dp;
  if (!scale_text.empty()) scale = scale_text;
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  json reduce_in = json::array(), reduce_out = json::array(), group = json::array();
  const std::string local_mse = "2/" + std::to_string(4 * 3);
  for (int r = 0; r < dp; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int lo = 4 * r, hi = lo + 4;
    tensors[p + "x"] = tensor({4, 4}, r, {{"tensor", "x"}, {"slice", {{lo, hi}, {0, 4}}}});
    tensors[p + "t"] = tensor({4, 3}, r, {{"tensor", "t"}, {"slice", {{lo, hi}, {0, 3}}}});
    tensors[p + "w"] = tensor({4, 3}, r, {{"tensor", "w"}});
    for (const char* in : {"x", "t", "w"}) inputs.push_back(p + in);
    tensors[p + "h"] = tensor({4, 3}, r, {{"tensor", "h"}, {"slice", {{lo, hi}, {0, 3}}}});
    tensors[p + "d"] = tensor({4, 3}, r);
    json dh_of = {{"tensor", "dh"}, {"slice", {{lo, hi}, {0, 3}}}, {"scale", scale}};
    if (bug == Bug::kWrongScaleClaim) dh_of["scale"] = 3;
    if (bug == Bug::kUnscaledLocalClaims) dh_of.erase("scale");
    tensors[p + "dh"] = tensor({4, 3}, r, dh_of);
    json dw_of = {{"tensor", "dw"}, {"over", {{lo, hi}}}, {"scale", scale}};
    if (bug == Bug::kUnscaledLocalClaims) dw_of.erase("scale");
    tensors[p + "dw"] = tensor({4, 3}, r, dw_of);
    tensors[p + "dw_sum"] = tensor({4, 3}, r, {{"tensor", "dw"}, {"scale", scale}});
    tensors[p + "dw_avg"] = tensor({4, 3}, r, {{"tensor", "dw"}});
    tensors[p + "w_new"] = tensor({4, 3}, r, {{"tensor", "w_new"}});
    outputs.push_back(p + "w_new");
    ops.push_back({{"name", p + "fwd"}, {"op", "matmul"}, {"in", {p + "x", p + "w"}},
                   {"out", {p + "h"}}});
    ops.push_back(
        {{"name", p + "diff"}, {"op", "sub"}, {"in", {p + "h", p + "t"}}, {"out", {p + "d"}}});
    ops.push_back({{"name", p + "mse_grad"}, {"op", "scale"}, {"in", {p + "d"}},
                   {"out", {p + "dh"}}, {"attrs", {{"factor", local_mse}}}});
    ops.push_back({{"name", p + "wgrad"}, {"op", "matmul"}, {"in", {p + "x", p + "dh"}},
                   {"out", {p + "dw"}}, {"attrs", {{"transpose_a", true}}}});
    reduce_in.push_back(p + "dw");
    reduce_out.push_back(p + "dw_sum");
    group.push_back(r);
    const std::string avg = "1/" + std::to_string(bug == Bug::kNoAveraging ? 1 : dp);
    ops.push_back({{"name", p + "average"}, {"op", "scale"}, {"in", {p + "dw_sum"}},
                   {"out", {p + "dw_avg"}}, {"attrs", {{"factor", avg}}}});
    ops.push_back({{"name", p + "sgd"}, {"op", "sgd"}, {"in", {p + "w", p + "dw_avg"}},
                   {"out", {p + "w_new"}}, {"attrs", {{"lr", "1/10"}}}});
  }
  ops.push_back({{"name", "dp_allreduce"},
                 {"op", "all_reduce"},
                 {"in", reduce_in},
                 {"out", reduce_out},
                 {"group", group}});
  json parallel = {{"world", dp},
                   {"tensors", tensors},
                   {"inputs", inputs},
                   {"ops", ops},
                   {"outputs", outputs}};
  return {{"format", "shardproof-plan/1"},
          {"name", "ddp dp" + std::to_string(dp)},
          {"logical", logical},
          {"parallel", parallel}};
}

bool has_finding_at(const Report& r, const std::string& tensor) {
  for (const Finding& f : r.findings)
    if (f.kind == "mismatch" && f.tensor == tensor) return true;
  return false;
}

TEST(ScaledClaim, DataParallelGradientsThatClaimDpTimesTheirSliceAreProven) {
  for (int dp : {2, 4}) {
    Report r = testing::verify_json(ddp_plan(dp, Bug::kNone), "ddp");
    EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
    // Every rank's dh, dw, the all-reduce and the update are stages of their own.
    EXPECT_GE(r.stats.stages, 3 * dp + 2) << testing::explain(r);
  }
}

TEST(ScaledClaim, AScaleWrittenAsAFractionStringIsTheSameClaim) {
  Report r = testing::verify_json(ddp_plan(2, Bug::kNone, "4/2"), "ddp-fraction");
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

TEST(ScaledClaim, AWrongScaleIsRefutedWithAFindingAtItsTensor) {
  Report r = testing::verify_json(ddp_plan(2, Bug::kWrongScaleClaim), "ddp-wrong-scale");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(has_finding_at(r, "dh")) << testing::explain(r);
  EXPECT_NE(report_to_text(r).find("scaled by 3"), std::string::npos) << testing::explain(r);
}

TEST(ScaledClaim, LocalGradientsClaimedWithoutTheirScaleAreRefuted) {
  Report r = testing::verify_json(ddp_plan(2, Bug::kUnscaledLocalClaims), "ddp-unscaled");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(has_finding_at(r, "dh")) << testing::explain(r);
}

TEST(ScaledClaim, AMissingAverageIsFoundAtTheGradient) {
  Report r = testing::verify_json(ddp_plan(2, Bug::kNoAveraging), "ddp-no-average");
  ASSERT_EQ(r.verdict, Verdict::NotEquivalent) << testing::explain(r);
  EXPECT_TRUE(has_finding_at(r, "dw")) << testing::explain(r);
}

// The scale is part of every key it can change: the stage of a claim with a
// wrong scale never shares the right one's key, and unscaled stages keep
// the keys they had.
TEST(ScaledClaim, TheScaleIsInTheStageKey) {
  auto keys = [](const json& plan) {
    Plan p = testing::parse(plan);
    std::map<std::string, std::string> out;
    for (const Stage& s : build_stages(p)) out[s.title] = stage_key(s);
    return out;
  };
  const std::map<std::string, std::string> right = keys(ddp_plan(2, Bug::kNone));
  const std::map<std::string, std::string> same = keys(ddp_plan(2, Bug::kNone, "2"));
  EXPECT_EQ(right, same);
  const std::map<std::string, std::string> wrong = keys(ddp_plan(2, Bug::kWrongScaleClaim));
  std::set<std::string> right_keys;
  for (const auto& [title, key] : right) right_keys.insert(key);
  const auto it = wrong.find("dh[0:4, 0:3] scaled by 3");
  ASSERT_NE(it, wrong.end()) << "stages: " << wrong.size();
  EXPECT_FALSE(right_keys.count(it->second));
  // The update stages claim no scale: their keys are those of any plan.
  EXPECT_EQ(right.at("w_new[0:4, 0:3]"), wrong.at("w_new[0:4, 0:3]"));
}

// The same stage with and without a scale of 1 written out: one key.
TEST(ScaledClaim, AScaleOfOneIsNoScale) {
  json plan = ddp_plan(2, Bug::kNone);
  json with_one = plan;
  with_one["parallel"]["tensors"]["r0.dw_avg"]["of"]["scale"] = 1;
  Plan a = testing::parse(plan), b = testing::parse(with_one);
  std::vector<Stage> sa = build_stages(a), sb = build_stages(b);
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_EQ(stage_key(sa[i]), stage_key(sb[i])) << i;
}

std::string invalid_rule(const json& plan, std::string* message = nullptr) {
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "");
  if (!r.error) return "(valid)";
  if (message) *message = r.error->to_string();
  return r.error->rule;
}

TEST(ScaledClaim, ZeroMalformedOrNonRealScalesAreInvalid) {
  for (json bad : {json(0), json("0/5"), json("two"), json(true), json::array({2}),
                   json("1/0"), json("1e5"), json("99999999999999999999999")}) {
    json plan = ddp_plan(2, Bug::kNone);
    plan["parallel"]["tensors"]["r0.dh"]["of"]["scale"] = bad;
    std::string message;
    EXPECT_EQ(invalid_rule(plan, &message), "lineage-scale") << bad.dump();
    EXPECT_NE(message.find("/parallel/tensors/r0.dh/of/scale"), std::string::npos) << message;
  }
  json plan = ddp_plan(2, Bug::kNone);
  plan["logical"]["tensors"]["ids"] = {{"shape", {2}}, {"dtype", "i64"}};
  plan["logical"]["inputs"].push_back("ids");
  plan["parallel"]["tensors"]["r0.ids"] = {
      {"shape", {2}}, {"dtype", "i64"}, {"rank", 0}, {"of", {{"tensor", "ids"}, {"scale", 2}}}};
  plan["parallel"]["inputs"].push_back("r0.ids");
  std::string message;
  EXPECT_EQ(invalid_rule(plan, &message), "lineage-scale");
  EXPECT_NE(message.find("only real tensors"), std::string::npos) << message;
}

// A part set is complete only in one scale, and a scaled output covers
// nothing of the logical output it is a multiple of.
TEST(ScaledClaim, PartSetsAndCoverageCountOneScale) {
  json plan = ddp_plan(2, Bug::kNone);
  plan["parallel"]["tensors"]["r0.dw"]["of"] = {{"tensor", "dw"}, {"part", {0, 2}}, {"scale", 2}};
  plan["parallel"]["tensors"]["r1.dw"]["of"] = {{"tensor", "dw"}, {"part", {1, 2}}};
  std::string message;
  EXPECT_EQ(invalid_rule(plan, &message), "lineage-parts") << message;
  EXPECT_NE(message.find("scaled by 2"), std::string::npos) << message;

  json covered = ddp_plan(2, Bug::kNone);
  for (const char* r : {"r0.w_new", "r1.w_new"})
    covered["parallel"]["tensors"][r]["of"]["scale"] = 2;
  EXPECT_EQ(invalid_rule(covered, &message), "lineage-coverage") << message;
}

// Scaled parts: the local gradients as parts 0 and 1 of 2 x dw (each rank's
// restricted sum is one part of the whole, times dp).
TEST(ScaledClaim, ScaledPartsAddUpToTheScaledSlice) {
  json plan = ddp_plan(2, Bug::kNone);
  for (int r = 0; r < 2; ++r)
    plan["parallel"]["tensors"]["r" + std::to_string(r) + ".dw"]["of"] = {
        {"tensor", "dw"}, {"part", {r, 2}}, {"scale", 2}};
  Report ok = testing::verify_json(plan, "ddp-parts");
  EXPECT_EQ(ok.verdict, Verdict::Equivalent) << testing::explain(ok);
  for (int r = 0; r < 2; ++r)
    plan["parallel"]["tensors"]["r" + std::to_string(r) + ".dw"]["of"]["scale"] = 3;
  Report bad = testing::verify_json(plan, "ddp-parts-wrong");
  ASSERT_EQ(bad.verdict, Verdict::NotEquivalent) << testing::explain(bad);
  EXPECT_TRUE(has_finding_at(bad, "dw")) << testing::explain(bad);
}

}  // namespace
}  // namespace shardproof
