// The class verifier (engine/classes/class_verifier.h): a compact plan verified per
// coordinate class gives the verdict its expansion gives, bugs included, and
// names the mesh coordinates where a bug shows.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <set>

#include "engine/classes/compact_explore.h"
#include "engine/decide/stage_store.h"
#include "engine/format/compact/compact_expand.h"
#include "engine/format/plan_parser.h"
#include "engine/verifier.h"
#include "planner/planner.h"
#include "tests/compact_support.h"
#include "tests/planner_support.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

planner::PlanConfig mlp(int layers, int dp, int tp, int pp, int mb, const std::string& opt,
                        const std::string& bug = "") {
  planner::PlanConfig c = testing::mlp_config(layers, dp, tp, pp, mb, opt, bug);
  c.batch = 4 * dp * mb;
  c.compact = true;
  return c;
}

Report verify(const nlohmann::json& plan, ParseOptions::Compact mode) {
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "", ParseOptions{mode});
  if (!r.plan) {
    Report bad;
    bad.verdict = Verdict::Invalid;
    bad.invalid = r.error;
    return bad;
  }
  EXPECT_EQ(mode == ParseOptions::Compact::Classes, r.plan->compact != nullptr);
  VerifyOptions options;
  options.jobs = 2;
  return verify_plan(*r.plan, options);
}

Report by_classes(const nlohmann::json& plan) {
  return verify(plan, ParseOptions::Compact::Classes);
}
Report expanded(const nlohmann::json& plan) {
  return verify(plan, ParseOptions::Compact::Expand);
}

TEST(ClassVerifier, TheExampleIsEquivalent) {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) + "/examples/compact-dp2-tp2-mb2.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  Report r = by_classes(plan);
  EXPECT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
}

// The class verifier reads each batch itself (stats.phases.parse): reading
// the plan's text adds to that time, never replaces it (a CLI run once
// showed 0.2 s of parse for 10.7 s of reading).
TEST(ClassVerifier, ThePlansParseTimeAddsToTheBatchesReading) {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) + "/examples/compact-dp2-tp2-mb2.json");
  const nlohmann::json plan = nlohmann::json::parse(in);
  const Report engine_only = by_classes(plan);
  ASSERT_GT(engine_only.stats.phases.parse, 0.0);
  Report r = engine_only;
  add_parse_time(r, 0.25);
  EXPECT_DOUBLE_EQ(r.stats.phases.parse, engine_only.stats.phases.parse + 0.25);
  EXPECT_DOUBLE_EQ(r.stats.seconds, engine_only.stats.seconds + 0.25);
  VerifyOptions options;
  options.parse.compact = ParseOptions::Compact::Classes;
  const Report text = verify_plan_text("plan.json", plan.dump(), "", options);
  EXPECT_EQ(text.verdict, Verdict::Equivalent) << testing::explain(text);
  EXPECT_GT(text.stats.class_anchors, 0);
}

// Exploring the corners is reported as progress before any stage is.
TEST(ClassVerifier, ExploringReportsProgress) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(2, 5, 2, 1, 6, "sgd"));
  ParseResult r =
      parse_plan_text(plan.dump(), "plan.json", "", ParseOptions{ParseOptions::Compact::Classes});
  ASSERT_TRUE(r.plan);
  VerifyOptions options;
  int64_t explored = 0, total = 0, stages = 0;
  options.progress = [&](const VerifyProgress& p) {
    if (std::string(p.status) == "exploring") {
      EXPECT_EQ(stages, 0) << "corners come first";
      explored = p.done;
      total = p.total;
    } else {
      ++stages;
    }
  };
  Report report = verify_plan(*r.plan, options);
  EXPECT_EQ(report.verdict, Verdict::Equivalent);
  EXPECT_GT(total, 0);
  EXPECT_EQ(explored, total);
  EXPECT_EQ(total, report.stats.class_anchors);
  EXPECT_GT(stages, 0);
}

// A corner's record is a function of the corner alone, whatever the
// explorer walked before (walks are kept per instance): the box check
// compares records taken in any order.
TEST(ClassVerifier, ACornersRecordDoesNotDependOnWhatWasExploredBefore) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(2, 5, 2, 2, 6, "sgd"));
  ParseResult r =
      parse_plan_text(plan.dump(), "plan.json", "", ParseOptions{ParseOptions::Compact::Classes});
  ASSERT_TRUE(r.plan);
  const compact::CompactGraph& g = r.plan->compact->graph;
  auto corner = [](int dp, int pp, int tp, int mb) {
    compact::Coord c{};
    c[0] = dp, c[1] = pp, c[2] = tp, c[compact::kMbAxis] = mb;
    return c;
  };
  const std::vector<compact::Coord> corners = {corner(0, 0, 0, 0), corner(3, 0, 1, 5),
                                               corner(0, 1, 0, 3), corner(4, 1, 1, 0),
                                               corner(2, 0, 0, 2)};
  auto record_of = [&](const std::vector<compact::Coord>& before, const compact::Coord& c) {
    compact::Explorer e(g);
    compact::Selection selection(g), checked(g);
    for (const compact::Coord& b : before) e.explore(b, selection, checked);
    compact::AnchorRecord rec = e.explore(c, selection, checked);
    return std::make_pair(rec.decisions, rec.decision_count);
  };
  for (const compact::Coord& c : corners) {
    const auto alone = record_of({}, c);
    EXPECT_EQ(record_of(corners, c), alone);
    std::vector<compact::Coord> reversed(corners.rbegin(), corners.rend());
    EXPECT_EQ(record_of(reversed, c), alone);
  }
}

// Same verdict as the expansion over a matrix of meshes, with sizes large
// enough (5 and more) that classes have interiors.
TEST(ClassVerifier, SameVerdictAsTheExpansion) {
  for (auto [dp, tp, pp, mb] : std::vector<std::array<int, 4>>{
           {1, 1, 1, 1}, {2, 2, 2, 2}, {5, 2, 1, 6}, {6, 4, 2, 5}, {3, 1, 4, 7}}) {
    planner::PlanConfig c = mlp(4, dp, tp, pp, mb, (dp + mb) % 2 ? "adam" : "sgd");
    nlohmann::json plan = planner::generate_plan("mlp", c);
    Report a = expanded(plan), b = by_classes(plan);
    EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
    EXPECT_EQ(b.verdict, Verdict::Equivalent) << dp << " " << tp << " " << pp << " " << mb << "\n"
                                              << testing::explain(b);
  }
}

// The explorer's walk (classes/compact_explore.cpp) and the cut
// (stage/stage.cpp) each say which ops a claim group's stage holds: the
// walk picks what to write out, the cut builds stages from it. Both walk the
// one claim cone (stage/claim_cone.h, tested in claim_cone_test.cpp), each
// over its own view; should the views drift apart, a class would verify
// other stages than the expansion's. So
// the distinct stages decided per class must be exactly those of the
// expansion. Compared by verdict key (StageIdentity::verdict): a stage inside
// a class differs from its corner's only in full-size positions, which the
// verdict key leaves out (docs/soundness.md, "Coordinate classes").
class KeyRecordingStore : public MemoryVerdictStore {
 public:
  std::optional<std::string> lookup(const StageIdentity& id) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      keys_.insert(id.verdict);
    }
    return MemoryVerdictStore::lookup(id);
  }
  std::set<std::string> keys() const { return keys_; }

 private:
  std::mutex mutex_;
  std::set<std::string> keys_;
};

std::set<std::string> decided_stage_keys(const nlohmann::json& plan, ParseOptions::Compact mode) {
  ParseResult r = parse_plan_text(plan.dump(1), "plan.json", "", ParseOptions{mode});
  EXPECT_TRUE(r.plan.has_value());
  if (!r.plan) return {};
  KeyRecordingStore store;
  VerifyOptions options;
  options.jobs = 2;
  options.store = &store;
  Report report = verify_plan(*r.plan, options);
  EXPECT_EQ(report.verdict, Verdict::Equivalent) << testing::explain(report);
  return store.keys();
}

TEST(ClassVerifier, ClassesDecideExactlyTheExpansionsStages) {
  std::vector<std::pair<std::string, planner::PlanConfig>> plans;
  plans.emplace_back("mlp", mlp(2, 2, 2, 2, 2, "sgd"));
  plans.emplace_back("mlp", mlp(3, 5, 2, 1, 6, "adam"));
  planner::PlanConfig llama = testing::transformer_config(2, 3, 2, 2, 3);
  llama.compact = true;
  plans.emplace_back("llama3-tiny", llama);
  for (const auto& [family, config] : plans) {
    nlohmann::json plan = planner::generate_plan(family, config);
    std::set<std::string> expanded = decided_stage_keys(plan, ParseOptions::Compact::Expand);
    std::set<std::string> classes = decided_stage_keys(plan, ParseOptions::Compact::Classes);
    EXPECT_FALSE(expanded.empty());
    EXPECT_EQ(classes, expanded) << family << ": " << classes.size() << " verdict keys per class, "
                                 << expanded.size() << " in the expansion";
  }
}

// Coverage (rule 3) counts a part set only when the parallel outputs hold
// every part: parts that intermediate tensors hold sum to nothing the plan
// returns. Here only dp=0's accumulated part of `s` is an output (dp=1's is
// computed and dropped, the all-reduce is gone): both paths must refuse it
// (the class path used to count every output part as covering).
TEST(ClassVerifier, APartSetThatOnlyIntermediatesCompleteCoversNothing) {
  std::ifstream in(std::string(SHARDPROOF_SOURCE_DIR) + "/examples/compact-dp2-tp2-mb2.json");
  nlohmann::json plan = nlohmann::json::parse(in);
  nlohmann::json& program = plan["parallel"]["programs"][0];
  nlohmann::json tensors = nlohmann::json::array(), ops = nlohmann::json::array();
  for (nlohmann::json t : program["tensors"]) {
    if (t["name"] == "dp{dp}.tp{tp}.s") continue;
    if (t.value("when", "") == "mb == 1") {
      nlohmann::json dropped = t;
      t["when"] = "mb == 1 && dp == 0";
      t["output"] = true;
      dropped["when"] = "mb == 1 && dp >= 1";
      tensors.push_back(dropped);
    }
    tensors.push_back(t);
  }
  for (const nlohmann::json& o : program["ops"])
    if (o["op"] != "all_reduce") ops.push_back(o);
  program["tensors"] = tensors;
  program["ops"] = ops;
  for (ParseOptions::Compact mode :
       {ParseOptions::Compact::Expand, ParseOptions::Compact::Classes}) {
    Report r = verify(plan, mode);
    EXPECT_EQ(r.verdict, Verdict::Invalid) << testing::explain(r);
    ASSERT_TRUE(r.invalid.has_value());
    EXPECT_EQ(r.invalid->rule, "lineage-coverage") << r.invalid->message;
  }
}

// A transformer plan (llama3-tiny, with attention, norms, Adam and pipeline
// sends) per class gives its expansion's verdict; so does one of its bugs.
TEST(ClassVerifier, LlamaPlanSameVerdictAsTheExpansion) {
  planner::PlanConfig c = testing::transformer_config(2, 5, 2, 2, 6);
  c.compact = true;
  nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::Equivalent) << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::Equivalent) << testing::explain(b);
  c.bug = "allreduce-mean-not-sum";
  plan = planner::generate_plan("llama3-tiny", c);
  EXPECT_EQ(by_classes(plan).verdict, Verdict::NotEquivalent);
}

// In a compact plan's ops, rank dp=1 adds the previous micro-batch's l0.wq
// gradient where its own is due (the link for mb >= 2); false if the plan
// has no such link.
bool add_wrong_micro_batch_at_dp1(nlohmann::json& ops) {
  size_t at = ops.size();
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]["name"] == "dp{dp}.tp{tp}.pp0.grad.l0.wq.acc{mb}" && ops[i]["when"] == "mb >= 2")
      at = i;
  if (at == ops.size()) return false;
  nlohmann::json wrong = ops[at], after = ops[at];
  ops[at]["when"] = "mb >= 2 && dp < 1";
  after["when"] = "mb >= 2 && dp > 1";
  ops.push_back(after);
  wrong["when"] = "mb >= 2 && dp == 1";
  wrong["in"][1] = "dp{dp}.tp{tp}.pp0.mb{mb - 1}.grad.l0.wq.mb";
  ops.push_back(wrong);
  return true;
}

// Data-parallel gradients claim partial sums (lineage "over"): each
// micro-batch's and each rank's. The llama planner writes them; per class
// they give the expansion's verdicts, and a rank that accumulates one
// micro-batch twice (dp=1 only) is found at its own rank sum.
TEST(ClassVerifier, PartialSumClaimsOfGradientsAreCheckedPerClass) {
  planner::PlanConfig c = testing::transformer_config(2, 3, 2, 2, 4);
  c.compact = true;
  for (const char* bug :
       {"", "dp-grad-mean-not-sum", "dp-grad-not-synced", "microbatch-loss-scale"}) {
    c.bug = bug;
    nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
    EXPECT_NE(plan.dump().find("\"over\""), std::string::npos);
    Report a = expanded(plan), b = by_classes(plan);
    EXPECT_EQ(a.verdict, b.verdict) << bug << "\n" << testing::explain(b);
    EXPECT_EQ(b.verdict, *bug ? Verdict::NotEquivalent : Verdict::Equivalent)
        << bug << "\n"
        << testing::explain(b);
  }
  c.bug = "";
  nlohmann::json plan = planner::generate_plan("llama3-tiny", c);
  nlohmann::json& ops = plan["parallel"]["programs"][0]["ops"];
  ASSERT_TRUE(add_wrong_micro_batch_at_dp1(ops));
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::NotEquivalent) << testing::explain(a);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  const Finding& f = b.findings[0];
  EXPECT_NE(f.stage.find("over [32:64]"), std::string::npos) << f.stage;
  EXPECT_NE(f.message.find("dp=1"), std::string::npos) << f.message;
}

// MoE rows are micro-batch major: a rank's accumulated dense gradient claims
// its rows as a strided set (one block every dp blocks). Per class the plan
// gives its expansion's verdict, and a rank that adds the wrong micro-batch
// (dp=1 only) is found at its own strided sum.
TEST(ClassVerifier, StridedClaimsOfMoeGradientsAreCheckedPerClass) {
  planner::PlanConfig c = testing::transformer_config(2, 4, 2, 1, 4);
  c.ep = 4;
  c.seq = 16;
  c.batch = 64;
  c.compact = true;
  nlohmann::json plan = planner::generate_plan("deepseek-v3", c);
  nlohmann::json& program = plan["parallel"]["programs"][0];
  bool strided = false;
  for (const nlohmann::json& t : program["tensors"])
    if (t.contains("of") && t["of"].contains("over")) strided |= t["of"]["over"][0].size() == 4;
  EXPECT_TRUE(strided);
  EXPECT_EQ(by_classes(plan).verdict, Verdict::Equivalent);

  nlohmann::json& ops = program["ops"];
  ASSERT_TRUE(add_wrong_micro_batch_at_dp1(ops)) << "no accumulation link of l0.wq";
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::NotEquivalent) << testing::explain(a);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  const Finding& f = b.findings[0];
  EXPECT_NE(f.stage.find(" step "), std::string::npos) << f.stage;
  EXPECT_NE(f.message.find("dp=1"), std::string::npos) << f.message;
}

// Vocabulary-parallel ids are compared with constants affine in tp (each
// rank's vocabulary range). Attribute values are not part of a corner's
// record: they are positions that reduction maps, or in the verdict key as
// written. Per class the plan still gives its expansion's verdicts, with an
// interior tp class (tp 1..6 of 8), correct and with the range bug.
TEST(ClassVerifier, AttributesAffineInTheCoordinatesGiveTheExpansionsVerdicts) {
  planner::PlanConfig c = testing::transformer_config(1, 1, 8, 1, 1);
  c.compact = true;
  for (const char* bug : {"", "vocab-range-off-by-one"}) {
    c.bug = bug;
    nlohmann::json plan = planner::generate_plan("llama3-8b", c);
    EXPECT_NE(plan.dump().find("\"expr\":\"tp*"), std::string::npos);
    Report a = expanded(plan), b = by_classes(plan);
    EXPECT_EQ(b.verdict, *bug ? Verdict::NotEquivalent : Verdict::Equivalent)
        << bug << "\n"
        << testing::explain(b);
    EXPECT_EQ(a.verdict, b.verdict) << bug;
  }
}

// An op no claim needs (dead code) is still read: one with a wrong shape at
// an interior coordinate makes the plan invalid, as its expansion is.
TEST(ClassVerifier, ADeadOpWithAShapeErrorIsInvalid) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(4, 6, 2, 2, 5, "sgd"));
  nlohmann::json& prog = plan["parallel"]["programs"][0];
  nlohmann::json x = nullptr;
  for (const auto& t : prog["tensors"])
    if (t.value("input", false) && t["shape"].size() == 2) x = t;
  ASSERT_FALSE(x.is_null());
  const std::string dead = "dp{dp}.tp{tp}.dead";
  prog["tensors"].push_back(
      {{"name", dead}, {"shape", {3, 3}}, {"dtype", x["dtype"]}, {"when", "dp == 3"}});
  prog["ops"].push_back({{"name", "dp{dp}.tp{tp}.dead.op"},
                         {"op", "matmul"},
                         {"in", {x["name"], x["name"]}},
                         {"out", {dead}},
                         {"when", "dp == 3"}});
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::Invalid) << testing::explain(a);
  ASSERT_EQ(b.verdict, Verdict::Invalid) << testing::explain(b);
  EXPECT_EQ(a.invalid->rule, b.invalid->rule);
}

// A name that does not tell instances apart (dp dropped from it): the
// expansion has a collision; the class verifier, which cannot show every
// instance its own name, never answers equivalent.
TEST(ClassVerifier, ANameSharedByInstancesIsNeverEquivalent) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(4, 6, 2, 2, 5, "sgd"));
  nlohmann::json& tensors = plan["parallel"]["programs"][0]["tensors"];
  std::string name;
  for (auto& t : tensors) {
    name = t["name"].get<std::string>();
    if (name.rfind("dp{dp}.", 0) == 0 && t.value("input", false)) {
      t["name"] = "dp." + name.substr(7);
      break;
    }
  }
  for (auto& o : plan["parallel"]["programs"][0]["ops"])
    for (auto& in : o["in"])
      if (in == name) in = "dp." + name.substr(7);
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::Invalid) << testing::explain(a);
  EXPECT_EQ(b.verdict, Verdict::Unknown) << testing::explain(b);
}

// Replaces op `i` by the edited op at one coordinate (dp == d, and mb == m
// when the op is per micro-batch; never along its group axes) beside the
// original everywhere else.
void edit_at(nlohmann::json& ops, size_t i, int d, int m,
             const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json op = ops[i];
  const bool dp_ok = !op.contains("group") ||
                     std::find(op["group"].begin(), op["group"].end(), "dp") == op["group"].end();
  const bool mb_ok = op.dump().find("{mb") != std::string::npos;
  const std::string when = op.value("when", "");
  auto with = [&](const std::string& c) { return when.empty() ? c : when + " && " + c; };
  std::vector<std::string> outside, inside;
  if (dp_ok) {
    outside = {"dp < " + std::to_string(d), "dp > " + std::to_string(d)};
    inside = {"dp == " + std::to_string(d)};
  }
  if (mb_ok) {
    std::string pin = inside.empty() ? "" : inside[0] + " && ";
    outside.push_back(pin + "mb < " + std::to_string(m));
    outside.push_back(pin + "mb > " + std::to_string(m));
    inside = {pin + "mb == " + std::to_string(m)};
  }
  ops.erase(ops.begin() + static_cast<long>(i));
  for (const std::string& c : outside) {
    nlohmann::json piece = op;
    piece["when"] = with(c);
    ops.push_back(piece);
  }
  edit(op);
  if (!inside.empty()) op["when"] = with(inside[0]);
  ops.push_back(op);
}

// Seeded random edits of a compact plan at one random coordinate (an op's
// reduce, its input order, a condition's constant, a claim's slice bound):
// whenever the class verifier answers equivalent, the expansion does too.
TEST(ClassVerifier, RandomEditsAreNeverPassedOffAsEquivalent) {
  const nlohmann::json base = planner::generate_plan("mlp", mlp(4, 5, 2, 2, 6, "sgd"));
  std::mt19937 rng(20261122);
  int decided_alike = 0, edits = 0, found = 0;
  for (int trial = 0; trial < 32; ++trial) {
    nlohmann::json plan = base;
    nlohmann::json& prog =
        plan["parallel"]["programs"][rng() % plan["parallel"]["programs"].size()];
    nlohmann::json& ops = prog["ops"];
    const size_t i = rng() % ops.size();
    const int d = static_cast<int>(rng() % 5), m = static_cast<int>(rng() % 6);
    const nlohmann::json& op = ops[i];
    switch (trial % 4) {
      case 0:  // inputs swapped
        if (op["in"].size() < 2) continue;
        edit_at(ops, i, d, m, [](nlohmann::json& o) { std::swap(o["in"][0], o["in"][1]); });
        break;
      case 1:  // a reduce changed
        if (!op.contains("attrs") || !op["attrs"].contains("reduce")) continue;
        edit_at(ops, i, d, m, [](nlohmann::json& o) {
          o["attrs"]["reduce"] = o["attrs"]["reduce"] == "sum" ? "mean" : "sum";
        });
        break;
      case 2: {  // a condition's constant moved by one
        if (!op.contains("when")) continue;
        std::string w = op["when"];
        size_t digit = w.find_last_of("0123456789");
        if (digit == std::string::npos) continue;
        w[digit] = w[digit] == '0' ? '1' : static_cast<char>(w[digit] - 1);
        ops[i]["when"] = w;
        break;
      }
      case 3: {  // a claim's slice bound moved by one
        nlohmann::json& t = prog["tensors"][rng() % prog["tensors"].size()];
        if (!t.contains("of") || !t["of"].contains("slice")) continue;
        nlohmann::json& bound = t["of"]["slice"][0][0];
        bound = bound.is_number() ? nlohmann::json(bound.get<int64_t>() + 1)
                                  : nlohmann::json(bound.get<std::string>() + " + 1");
        break;
      }
    }
    ++edits;
    Report a = expanded(plan), b = by_classes(plan);
    if (b.verdict == Verdict::Equivalent) {
      EXPECT_EQ(a.verdict, Verdict::Equivalent) << "trial " << trial << "\n" << testing::explain(a);
    }
    decided_alike += a.verdict == b.verdict;
    found += b.verdict == Verdict::NotEquivalent || b.verdict == Verdict::Invalid;
  }
  // Not vacuous: edits were made, most decided alike, some of them wrong.
  EXPECT_GE(edits, 12);
  EXPECT_GE(decided_alike * 4, edits * 3);
  EXPECT_GE(found, 4);
}

// The op instances a compact plan denotes, counted without expanding it.
TEST(ClassVerifier, OpInstancesAreCountedWithoutExpanding) {
  for (auto [dp, tp, pp, mb] : std::vector<std::array<int, 4>>{{5, 2, 1, 6}, {2, 4, 2, 3}}) {
    nlohmann::json plan = planner::generate_plan("mlp", mlp(4, dp, tp, pp, mb, "adam"));
    ParseResult a =
        parse_plan_text(plan.dump(), "plan.json", "", ParseOptions{ParseOptions::Compact::Expand});
    ParseResult b =
        parse_plan_text(plan.dump(), "plan.json", "", ParseOptions{ParseOptions::Compact::Classes});
    ASSERT_TRUE(a.plan && b.plan && b.plan->compact);
    EXPECT_EQ(static_cast<int64_t>(a.plan->parallel.ops.size()),
              compact::op_instance_count(b.plan->compact->graph));
  }
}

// Every mlp catalogue bug is found per class too, never called equivalent.
TEST(ClassVerifier, EveryMlpBugIsFound) {
  for (const planner::BugInfo& bug : planner::list_bugs("mlp")) {
    nlohmann::json plan = planner::generate_plan("mlp", mlp(4, 5, 2, 2, 6, "sgd", bug.name));
    Report a = expanded(plan), b = by_classes(plan);
    EXPECT_EQ(a.verdict, b.verdict) << bug.name << "\n" << testing::explain(b);
    EXPECT_NE(b.verdict, Verdict::Equivalent) << bug.name;
  }
}

// A bug at one interior coordinate (dp=3, mb=2 of dp6 mb5), nowhere near a
// class corner: the condition that limits it makes its own classes, so it
// is found, and the finding names the coordinates where it shows.
TEST(ClassVerifier, ABugAtOneInteriorCoordinateIsFoundThere) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(4, 6, 2, 2, 5, "sgd"));
  nlohmann::json& ops = plan["parallel"]["programs"][0]["ops"];
  size_t at = ops.size();
  for (size_t i = 0; i < ops.size() && at == ops.size(); ++i)
    if (ops[i]["op"] == "all_reduce" && ops[i]["group"] == nlohmann::json::array({"tp"})) at = i;
  ASSERT_LT(at, ops.size());
  nlohmann::json correct = ops[at], wrong = ops[at];
  ops.erase(ops.begin() + static_cast<long>(at));
  for (const char* outside : {"dp < 3", "dp > 3", "dp == 3 && mb < 2", "dp == 3 && mb > 2"}) {
    nlohmann::json piece = correct;
    piece["when"] = outside;
    ops.push_back(piece);
  }
  wrong["when"] = "dp == 3 && mb == 2";
  wrong["attrs"]["reduce"] = "mean";
  ops.push_back(wrong);
  Report a = expanded(plan), b = by_classes(plan);
  EXPECT_EQ(a.verdict, Verdict::NotEquivalent) << testing::explain(a);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  EXPECT_NE(b.findings[0].message.find("dp=3"), std::string::npos) << b.findings[0].message;
  EXPECT_NE(b.findings[0].message.find("mb=2"), std::string::npos) << b.findings[0].message;
  // Without the bug the same split plan is equivalent: the split alone is
  // not what is found.
  ops.back()["attrs"]["reduce"] = "sum";
  EXPECT_EQ(by_classes(plan).verdict, Verdict::Equivalent);
}

// A bug on a diagonal of the mesh (dp + tp == 4: no single-axis condition,
// so no breakpoint of its own) is reached when a round splits the dp class
// whose corners' walks disagree. That round's finding is the answer: a
// stage of concrete instances proven wrong holds whatever the classes, and
// splitting on until they settle only costs (a wrong shard in one layer of
// llama3-405b took 4 rounds and 20 GB). The message says its coordinates
// are a corner of their class, not that the class fails as a whole.
TEST(ClassVerifier, AFindingIsAnsweredInTheRoundThatReachesIt) {
  nlohmann::json plan = planner::generate_plan("mlp", mlp(2, 8, 2, 2, 8, "sgd"));
  nlohmann::json& ops = plan["parallel"]["programs"][0]["ops"];
  size_t at = ops.size();
  for (size_t i = 0; i < ops.size() && at == ops.size(); ++i)
    if (ops[i]["op"] == "gelu") at = i;
  ASSERT_LT(at, ops.size());
  nlohmann::json wrong = ops[at], below = ops[at], above = ops[at];
  wrong["when"] = "dp + tp == 4";
  wrong["op"] = "relu";
  below["when"] = "dp + tp <= 3";
  above["when"] = "dp + tp >= 5";
  ops[at] = wrong;
  ops.push_back(below);
  ops.push_back(above);
  ClassRunCounts counts;
  Report b = testing::by_classes(plan, &counts);
  EXPECT_EQ(expanded(plan).verdict, Verdict::NotEquivalent);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  const std::string& m = b.findings[0].message;
  EXPECT_TRUE(m.find("dp=3 tp=1") != std::string::npos || m.find("dp=4 tp=0") != std::string::npos)
      << m;
  EXPECT_NE(m.find("it is a corner of the class"), std::string::npos) << m;
  // Round 0 (dp corners 0, 1, 6, 7) and round 1 (3 and 4 added), one batch
  // per pipeline stage each; the classes are not split further.
  EXPECT_EQ(counts.batches, 4);
}

// A plan whose dp coordinates should stay one class under the class
// verifier: fewer corners than the whole dp axis (8 here, with 2 tp and 2
// micro-batches), and `bug` found at the coordinates where it runs, naming
// each of `where` in its first finding.
void expect_dp_classes_kept(const std::string& family, planner::PlanConfig c,
                            const std::string& bug, const std::vector<std::string>& where) {
  c.compact = true;
  const nlohmann::json plan = planner::generate_plan(family, c);
  Report r = by_classes(plan);
  ASSERT_EQ(r.verdict, Verdict::Equivalent) << testing::explain(r);
  EXPECT_LT(r.stats.class_anchors, 8 * 2 * 2) << "every dp coordinate explored";

  c.bug = bug;
  const nlohmann::json buggy = planner::generate_plan(family, c);
  Report b = by_classes(buggy);
  EXPECT_EQ(expanded(buggy).verdict, Verdict::NotEquivalent);
  ASSERT_EQ(b.verdict, Verdict::NotEquivalent) << testing::explain(b);
  ASSERT_FALSE(b.findings.empty());
  for (const std::string& w : where)
    EXPECT_NE(b.findings[0].message.find(w), std::string::npos) << b.findings[0].message;
}

// An expert-parallel all_to_all gives each dp rank its own output. A stage
// holds only the pieces of the output it claims, so the interior dp ranks
// are one class (before, each rank's place in the group was in its stage's
// key and every dp coordinate became a class of its own); a dispatch that
// swaps its dims is still found, at the coordinates where it runs.
TEST(ClassVerifier, ExpertDispatchStagesKeepTheDpClasses) {
  planner::PlanConfig c = testing::transformer_config(4, 8, 2, 1, 2);
  c.ep = 8;
  c.seq = 16;
  c.batch = 128;
  expect_dp_classes_kept("deepseek-v3", c, "all-to-all-dims-swapped", {"mb=0", "tp=0"});
}

// ZeRO: under zero 1 each dp rank slices its shard from its all_reduce
// output, under zero 2 it takes it from a reduce_scatter. A rank's shard
// stage keys the same at every dp coordinate (stage.cpp writes the
// collective out for the outputs it needs), so dp keeps its classes; the
// unfixed stages put the rank's place in the group in the key and every dp
// coordinate became a class of its own. The mean shows at the rank's shard
// of the wq gradient.
TEST(ClassVerifier, ZeroShardStagesKeepTheDpClasses) {
  for (int zero : {1, 2}) {
    SCOPED_TRACE("zero " + std::to_string(zero));
    planner::PlanConfig c = testing::transformer_config(1, 8, 2, 1, 2);
    c.zero = zero;
    expect_dp_classes_kept("llama3-tiny", c, "dp-grad-mean-not-sum", {"grad.l0.wq", "tp=0"});
  }
}

}  // namespace
}  // namespace shardproof
