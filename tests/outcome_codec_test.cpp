// Stage keys and the position-based outcome form the cache stores: a stage
// renamed throughout keeps its key and gets its findings in its own names
// from the other's outcome; a collective in the wrong order never shares
// the correct stage's key; and bytes that do not fit are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/decide/outcome_codec.h"
#include "engine/decide/stage_store.h"
#include "engine/format/plan_parser.h"
#include "engine/prove/stage_prover.h"
#include "engine/stage/canonical.h"
#include "engine/stage/shape_reduction.h"
#include "engine/stage/stage.h"

namespace shardproof {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const fs::path kSource = SHARDPROOF_SOURCE_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every tensor and op name of the plan gets `prefix`: the same plan under
// other names, as another layer of a model would be.
json renamed(const json& plan, const std::string& prefix) {
  std::set<std::string> names;
  for (const char* graph : {"logical", "parallel"}) {
    for (const auto& [name, decl] : plan[graph]["tensors"].items()) names.insert(name);
    for (const json& op : plan[graph]["ops"])
      if (op.contains("name")) names.insert(op["name"].get<std::string>());
  }
  // Names are string values, and the keys of the "tensors" tables.
  std::function<json(const json&, bool)> walk = [&](const json& j, bool table) -> json {
    if (j.is_string())
      return names.count(j.get<std::string>()) ? json(prefix + j.get<std::string>()) : j;
    if (j.is_array()) {
      json out = json::array();
      for (const json& item : j) out.push_back(walk(item, false));
      return out;
    }
    if (!j.is_object()) return j;
    json out = json::object();
    for (const auto& [key, value] : j.items())
      out[table && names.count(key) ? prefix + key : key] = walk(value, key == "tensors");
    return out;
  };
  return walk(plan, false);
}

std::vector<Stage> reduced_stages(const std::string& text) {
  ParseResult parsed = parse_plan_text(text, "plan.json", "");
  EXPECT_TRUE(parsed.plan) << (parsed.error ? parsed.error->to_string() : parsed.io_error);
  if (!parsed.plan) return {};
  std::vector<Stage> stages = build_stages(*parsed.plan);
  for (Stage& s : stages) reduce_stage(s);
  return stages;
}

json findings_json(const StageOutcome& o) {
  json out = json::array();
  for (const Finding& f : o.findings)
    out.push_back({{"kind", f.kind},
                   {"stage", f.stage},
                   {"tensor", f.tensor},
                   {"parallel_tensors", f.parallel_tensors},
                   {"elements", f.elements},
                   {"ops", f.ops},
                   {"counterexample", f.counterexample},
                   {"message", f.message}});
  return out;
}

TEST(OutcomeCodec, RenamedStageGetsTheOtherStagesFindingsInItsOwnNames) {
  json plan = json::parse(slurp(kSource / "examples" / "tp2-ffn-bug-mean.json"));
  std::vector<Stage> a = reduced_stages(plan.dump());
  std::vector<Stage> b = reduced_stages(renamed(plan, "layer7.").dump());
  ASSERT_EQ(a.size(), b.size());
  int refuted = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].title);
    EXPECT_EQ(stage_key(a[i]), stage_key(b[i])) << "renaming must not change the key";
    EXPECT_EQ(stage_identity(a[i]).digest, stage_identity(b[i]).digest);
    StageOutcome solved_a = prove_stage(a[i], ProverOptions{});
    StageOutcome solved_b = prove_stage(b[i], ProverOptions{});
    std::optional<std::string> bytes = encode_outcome(a[i], solved_a);
    ASSERT_TRUE(bytes) << "a definite outcome of a plain stage must be shareable";
    std::optional<StageOutcome> shared = decode_outcome(b[i], *bytes);
    ASSERT_TRUE(shared);
    EXPECT_EQ(shared->status, solved_b.status);
    EXPECT_EQ(findings_json(*shared), findings_json(solved_b)) << findings_json(*shared).dump(1);
    if (solved_a.status == StageStatus::Refuted) {
      ++refuted;
      // The names really changed: the decoded findings speak of layer7.*.
      EXPECT_EQ(shared->findings.at(0).parallel_tensors.at(0).rfind("layer7.", 0), 0u);
    }
  }
  EXPECT_GE(refuted, 1) << "the example's bug must be found";
}

TEST(OutcomeCodec, UndecidedOutcomesAreNotShared) {
  std::vector<Stage> stages = reduced_stages(slurp(kSource / "examples" / "tp2-ffn.json"));
  ASSERT_FALSE(stages.empty());
  StageOutcome unknown;
  unknown.status = StageStatus::Unknown;
  EXPECT_FALSE(encode_outcome(stages[0], unknown));
  StageOutcome error;
  error.status = StageStatus::InternalError;
  EXPECT_FALSE(encode_outcome(stages[0], error));
}

TEST(OutcomeCodec, BytesThatDoNotFitAreRefused) {
  std::vector<Stage> stages = reduced_stages(slurp(kSource / "examples" / "tp2-ffn-bug-mean.json"));
  ASSERT_FALSE(stages.empty());
  const Stage& last = stages.back();
  StageOutcome o = prove_stage(last, ProverOptions{});
  ASSERT_EQ(o.status, StageStatus::Refuted);
  std::string bytes = *encode_outcome(last, o);
  EXPECT_FALSE(decode_outcome(last, ""));
  EXPECT_FALSE(decode_outcome(last, "not json"));
  EXPECT_FALSE(decode_outcome(last, bytes.substr(0, bytes.size() / 2)));
  json j = json::parse(bytes);
  j["codec"] = kOutcomeCodecVersion + 1;
  EXPECT_FALSE(decode_outcome(last, j.dump())) << "another codec version never decodes";
  j = json::parse(bytes);
  j["findings"][0]["tensors"][0] = 100000;
  EXPECT_FALSE(decode_outcome(last, j.dump())) << "a position outside the stage";
  j = json::parse(bytes);
  j["status"] = "unknown";
  EXPECT_FALSE(decode_outcome(last, j.dump()));
}

// design.md: "a stage with an all-gather order bug must never hash like the
// correct one". The buggy plan gathers the shards in the wrong order.
TEST(StageKey, CollectiveOrderBugNeverSharesTheCorrectKey) {
  fs::path dir = kSource / "tests" / "data" / "plans" / "cache";
  std::vector<Stage> good = reduced_stages(slurp(dir / "allgather.json"));
  std::vector<Stage> bug = reduced_stages(slurp(dir / "allgather-order-bug.json"));
  ASSERT_FALSE(good.empty());
  ASSERT_FALSE(bug.empty());
  std::set<std::string> good_keys;
  for (const Stage& s : good) {
    EXPECT_EQ(prove_stage(s, ProverOptions{}).status, StageStatus::Proven) << s.title;
    good_keys.insert(stage_key(s));
  }
  int refuted = 0;
  for (const Stage& s : bug) {
    if (prove_stage(s, ProverOptions{}).status != StageStatus::Refuted) continue;
    ++refuted;
    EXPECT_EQ(good_keys.count(stage_key(s)), 0u)
        << s.title << ": the wrong-order stage hashes like a correct one";
  }
  EXPECT_GE(refuted, 1) << "the gather-order bug must be found";
}

}  // namespace
}  // namespace shardproof
