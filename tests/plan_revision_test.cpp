// Re-reading an edited plan op by op (engine/plan_outline, plan_revision)
// and re-verifying only what an edit reached (engine/plan_memo): whatever
// these take, the plan and the report must be the ones a full read and a
// full verification give.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/format/plan_outline.h"
#include "engine/format/plan_parser.h"
#include "engine/format/plan_revision.h"
#include "engine/plan_memo.h"
#include "engine/report/report.h"
#include "engine/report/report_codec.h"
#include "planner/planner.h"
#include "tests/map_store.h"
#include "tests/planner_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

json tiny_plan() {
  return planner::generate_plan("llama3-tiny", testing::transformer_config(2, 2, 2, 1, 1));
}

// Everything of a plan the engine reads, as text: two plans read alike when
// their texts agree.
std::string ir_text(const Plan& p) {
  std::ostringstream out;
  out << p.format << '|' << p.name << '|' << p.meta_json << '|' << p.path << '\n';
  for (const Graph* g : {&p.logical, &p.parallel}) {
    out << "graph " << g->parallel << ' ' << g->world << ' ' << g->source_file << '\n';
    for (const TensorDecl& t : g->tensors) {
      out << t.name << ' ' << shape_to_string(t.shape) << ' ' << dtype_name(t.dtype) << ' '
          << t.rank << ' ' << t.pointer;
      if (t.of) {
        out << " of " << t.of->tensor << ' ' << t.of->logical << ' ' << t.of->has_part << ' '
            << t.of->part_k << '/' << t.of->part_n;
        for (auto [lo, hi] : t.of->slice) out << ' ' << lo << ':' << hi;
      }
      out << '\n';
    }
    for (const Op& op : g->ops) {
      out << op.index << ' ' << op.name << ' ' << op.op << ' ' << op.rank << ' ' << op.pointer
          << " in";
      for (int t : op.in) out << ' ' << t;
      out << " out";
      for (int t : op.out) out << ' ' << t;
      out << " group";
      for (int r : op.group) out << ' ' << r;
      for (const auto& [k, v] : op.attrs) out << ' ' << k << '=' << v.describe();
      out << '\n';
    }
    for (const std::vector<int>* v :
         {&g->inputs, &g->outputs, &g->producer, &g->topo_order, &g->topo_rank}) {
      for (int x : *v) out << x << ' ';
      out << '\n';
    }
    out << g->tensor_index.size() << '\n';
  }
  return out.str();
}

ParsedPlanText kept(const std::string& text) {
  ParseResult r = parse_plan_text(text, "plan.json", "");
  EXPECT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  std::optional<ParsedPlanText> k = keep_parsed_text(text, std::move(*r.plan));
  EXPECT_TRUE(k);
  return std::move(*k);
}

TEST(PlanOutline, FindsEveryOpElement) {
  const std::string text =
      R"({"format": "x", "parallel": {"world": 1, "ops": []},)"
      R"( "logical": {"tensors": {"a": 1}, "ops": [ {"op": "a", "attrs": {"s": "],}\"["}} ,)"
      "\n"
      R"(  {"x": [1, [2, {"y": "{"}]]}, 7, "s" ], "inputs": []}})";
  std::optional<PlanOutline> o = outline_plan(text);
  ASSERT_TRUE(o);
  ASSERT_EQ(o->logical_ops.size(), 4u);
  auto at = [&](const TextSpan& s) { return text.substr(s.begin, s.size()); };
  EXPECT_EQ(at(o->logical_ops[0]), R"({"op": "a", "attrs": {"s": "],}\"["}})");
  EXPECT_EQ(at(o->logical_ops[1]), R"({"x": [1, [2, {"y": "{"}]]})");
  EXPECT_EQ(at(o->logical_ops[2]), "7");
  EXPECT_EQ(at(o->logical_ops[3]), R"("s")");
  EXPECT_TRUE(o->parallel_ops.empty());
}

TEST(PlanOutline, RefusesWhatItCannotOutline) {
  for (const char* text : {
           R"({"logical": {"ops": []}, "parallel": "graph.json"})",      // a graph file
           R"({"logical": {"op\u0073": []}, "parallel": {"ops": []}})",  // an escaped key
           R"({"logical": {"ops": []}, "parallel": {"tensors": {}}})",   // no ops
           R"({"logical": {"ops": [1, 2}, "parallel": {"ops": []}})",    // truncated
           R"([{"logical": {"ops": []}, "parallel": {"ops": []}}])",     // not an object
           R"({"logical": {"ops": [ ,]}, "parallel": {"ops": []}})",     // an empty element
           "",
       }) {
    EXPECT_FALSE(outline_plan(text)) << text;
  }
}

// The plan with op `index` of `graph` edited by `edit`, laid out as before.
std::string edited(json plan, const char* graph, size_t index, void (*edit)(json&)) {
  edit(plan[graph]["ops"][index]);
  return plan.dump(1);
}

size_t first_op(const json& plan, const char* graph, const std::string& kind) {
  const json& ops = plan[graph]["ops"];
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]["op"] == kind) return i;
  ADD_FAILURE() << "no " << kind << " op in " << graph;
  return 0;
}

TEST(PlanRevision, AnOpContentEditIsReadOpByOp) {
  const json plan = tiny_plan();
  ParsedPlanText previous = kept(plan.dump(1));
  const size_t logical = first_op(plan, "logical", "silu");
  const size_t parallel = first_op(plan, "parallel", "silu");
  json changed = plan;
  changed["logical"]["ops"][logical]["op"] = "gelu";
  changed["parallel"]["ops"][parallel]["op"] = "tanh";
  std::string text = changed.dump(1);
  const std::string expected = text;

  std::optional<OpEdits> edits = reread_edited(previous, text);
  ASSERT_TRUE(edits);
  EXPECT_EQ(edits->logical, std::vector<int>{static_cast<int>(logical)});
  EXPECT_EQ(edits->parallel, std::vector<int>{static_cast<int>(parallel)});
  EXPECT_TRUE(previous.text == expected);
  ParseResult full = parse_plan_text(expected, "plan.json", "");
  ASSERT_TRUE(full.plan);
  EXPECT_TRUE(ir_text(previous.plan) == ir_text(*full.plan));
}

TEST(PlanRevision, EditsBeyondOpContentsAreReadInFull) {
  const json plan = tiny_plan();
  const size_t silu = first_op(plan, "parallel", "silu");
  const size_t matmul = first_op(plan, "parallel", "matmul");
  json shape = plan;
  shape["logical"]["tensors"].begin()->at("shape")[0] = 3;
  json removed = plan;
  removed["parallel"]["ops"].erase(silu);
  json meta = plan;
  meta["meta"]["note"] = "x";
  // Each op alone is fine; together they use one fn with two arities.
  json two_arities = plan;
  for (size_t i : {silu, first_op(plan, "parallel", "add")}) {
    two_arities["parallel"]["ops"][i]["op"] = "map";
    two_arities["parallel"]["ops"][i]["attrs"] = {{"fn", "f"}};
  }
  ParseResult arity = parse_plan_text(two_arities.dump(1), "plan.json", "");
  ASSERT_TRUE(arity.error);
  EXPECT_EQ(arity.error->rule, "map-arity");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a tensor's shape", shape.dump(1)},
      {"an op removed", removed.dump(1)},
      {"the meta", meta.dump(1)},
      {"the layout", plan.dump(2)},
      {"an op's input",
       edited(plan, "parallel", matmul, [](json& op) { op["in"][0] = op["in"][1]; })},
      {"an op's name", edited(plan, "parallel", silu, [](json& op) { op["name"] = "renamed"; })},
      {"an unknown operator", edited(plan, "parallel", silu, [](json& op) { op["op"] = "nope"; })},
      {"a shape rule broken",
       edited(plan, "parallel", matmul, [](json& op) { op["op"] = "concat"; })},
      {"a map fn with two arities", two_arities.dump(1)},
      {"an op that is not an object",
       edited(plan, "parallel", silu, [](json& op) { op = "\x01"; })},
  };
  ParsedPlanText previous = kept(plan.dump(1));
  const std::string before = ir_text(previous.plan);
  for (auto [what, text] : cases) {
    SCOPED_TRACE(what);
    std::string copy = text;
    EXPECT_FALSE(reread_edited(previous, copy));
    // EXPECT_TRUE, not EXPECT_EQ: gtest would diff two large texts line by line.
    EXPECT_TRUE(copy == text);
    EXPECT_TRUE(previous.text == plan.dump(1));
    EXPECT_TRUE(ir_text(previous.plan) == before);
  }
}

// Random edits inside op elements, from plausible to byte garbage: the
// op-by-op read either declines or reads exactly what the full parser reads,
// and never accepts a text the full parser rejects.
TEST(PlanRevision, RandomEditsReadAsTheFullParserReadsThem) {
  const json plan = tiny_plan();
  const std::string base = plan.dump(1);
  const ParsedPlanText original = kept(base);
  // Kinds that keep an op's shapes (so the edit stays valid), then others.
  const std::vector<std::vector<std::string>> families = {
      {"silu", "gelu", "tanh", "exp", "neg", "sigmoid"}, {"add", "sub", "mul"}};
  const std::vector<std::string> kinds = {"silu", "add", "matmul", "map", "sum", "concat"};
  auto in_family = [&](const json& kind) {
    for (const auto& family : families)
      if (std::find(family.begin(), family.end(), kind) != family.end()) return true;
    return false;
  };
  std::mt19937 rng(20261122);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  int read_op_by_op = 0, rejected_by_both = 0, declined_valid = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const char* graph = pick(3) == 0 ? "logical" : "parallel";
    json changed = plan;
    json& ops = changed[graph]["ops"];
    const size_t how = pick(6);
    size_t index = pick(ops.size());
    // Kind swaps go mostly to ops of a family, so that many edits are valid.
    for (int tries = 0; how % 5 == 0 && tries < 64 && !in_family(ops[index]["op"]); ++tries)
      index = pick(ops.size());
    json& op = ops[index];
    std::string text;
    switch (how) {
      case 5:
      case 0: {
        const std::vector<std::string>* choices = &kinds;
        for (const auto& family : families)
          if (std::find(family.begin(), family.end(), op["op"]) != family.end())
            choices = pick(4) ? &family : &kinds;
        op["op"] = (*choices)[pick(choices->size())];
        break;
      }
      case 1:
        if (op.contains("attrs") && !op["attrs"].empty()) {
          json& v = op["attrs"].begin().value();
          v = v.is_number_integer() ? json(v.get<int64_t>() + 1) : json("changed");
        } else {
          op["attrs"] = {{"fn", kinds[pick(kinds.size())]}};
        }
        break;
      case 2:
        op["attrs"]["extra"] = static_cast<int>(pick(4));
        break;
      case 3:
        op["in"] = json::array();
        break;
      default:
        break;
    }
    text = changed.dump(1);
    if (changed == plan) {  // a byte edit inside the op's element
      std::optional<PlanOutline> o = outline_plan(text);
      ASSERT_TRUE(o);
      const std::vector<TextSpan>& ops =
          std::string(graph) == "logical" ? o->logical_ops : o->parallel_ops;
      const TextSpan s = ops[pick(ops.size())];
      const size_t at = s.begin + pick(s.size());
      text[at] = "{}[]\",:0a\\ "[pick(11)];
    }
    ParseResult full = parse_plan_text(text, "plan.json", "");
    ParsedPlanText previous = original;
    std::string copy = text;
    std::optional<OpEdits> edits = reread_edited(previous, copy);
    if (!full.plan) {
      EXPECT_FALSE(edits) << "trial " << trial;
      ++rejected_by_both;
      continue;
    }
    if (!edits) {
      ++declined_valid;
      continue;
    }
    ++read_op_by_op;
    EXPECT_TRUE(ir_text(previous.plan) == ir_text(*full.plan)) << "trial " << trial;
  }
  // Both outcomes were exercised, so neither check above is vacuous.
  EXPECT_GT(read_op_by_op, 50) << declined_valid << " valid edits declined";
  EXPECT_GT(rejected_by_both, 20);
}

Report full_verification(const std::string& text, const VerifyOptions& options) {
  ParseResult r = parse_plan_text(text, "plan.json", "");
  EXPECT_TRUE(r.plan);
  return r.plan ? verify_plan(*r.plan, options) : Report{};
}

// What must not depend on how the report was reached.
void expect_same_answer(const Report& got, const Report& want) {
  EXPECT_EQ(got.verdict, want.verdict) << report_to_text(got);
  EXPECT_EQ(got.stats.stages, want.stats.stages);
  EXPECT_EQ(got.stats.unique_stages, want.stats.unique_stages);
  EXPECT_EQ(report_to_json(got)["findings"], report_to_json(want)["findings"]);
}

// Every bug of the llama catalogue, verified after the correct plan as its
// edit: the same answer as a full verification. Bugs that only change op
// contents take the op-by-op path; the rest are read in full.
TEST(PlanMemo, EveryCatalogueBugVerifiesAsAnEditAsInFull) {
  testing::MapStore store;
  VerifyOptions options;
  options.jobs = 2;
  options.store = &store;
  int edits = 0;
  for (const planner::BugInfo& bug : planner::list_bugs("llama3-tiny")) {
    SCOPED_TRACE(bug.name);
    std::optional<planner::PlanConfig> config = testing::llama_config_for_bug(bug.name);
    ASSERT_TRUE(config);
    json buggy_plan = planner::generate_plan("llama3-tiny", *config);
    config->bug.clear();
    const json correct_plan = planner::generate_plan("llama3-tiny", *config);
    // The plan's name and meta name the bug: not an op edit.
    buggy_plan["meta"] = correct_plan["meta"];
    buggy_plan["name"] = correct_plan["name"];
    const std::string buggy = buggy_plan.dump(1), correct = correct_plan.dump(1);

    PlanMemo memo;
    Report first = verify_text_with_memo("plan.json", correct, options, memo);
    ASSERT_EQ(first.verdict, Verdict::Equivalent) << report_to_text(first);
    EXPECT_EQ(first.stats.reused, 0);
    Report edit = verify_text_with_memo("plan.json", buggy, options, memo);
    expect_same_answer(edit, full_verification(buggy, options));
    EXPECT_EQ(edit.verdict, Verdict::NotEquivalent);
    if (edit.stats.reused > 0) {
      ++edits;
      EXPECT_LT(edit.stats.reused, edit.stats.unique_stages);
    }
    // Unchanged stages are distinct stages like the others: the counts add up.
    EXPECT_EQ(decided_total(edit.stats), edit.stats.unique_stages) << report_headline(edit);
    Report back = verify_text_with_memo("plan.json", correct, options, memo);
    expect_same_answer(back, first);
  }
  // allreduce-mean-not-sum, for one, changes one attribute of one op.
  EXPECT_GE(edits, 3) << "too few bugs verified as edits: the op-by-op path went untested";
}

// A stage's logical cone holds only the ops its claimed region demands, so
// an edit that moves the demand (a slice's bounds, here onto the other half
// of a concat) must recompute the cone, not build from the one before.
TEST(PlanMemo, AnEditThatMovesTheDemandRecutsTheCone) {
  auto plan_with_slice = [](int start) {
    const json f4 = {{"shape", {4}}, {"dtype", "f32"}};
    json plan = {
        {"format", "shardproof-plan/1"},
        {"name", "half of a concat"},
        {"logical",
         {{"tensors",
           {{"a", f4},
            {"b", f4},
            {"ea", f4},
            {"nb", f4},
            {"c", {{"shape", {8}}, {"dtype", "f32"}}},
            {"y", f4}}},
          {"inputs", {"a", "b"}},
          {"ops",
           {{{"op", "exp"}, {"in", {"a"}}, {"out", {"ea"}}},
            {{"op", "neg"}, {"in", {"b"}}, {"out", {"nb"}}},
            {{"op", "concat"}, {"in", {"ea", "nb"}}, {"out", {"c"}}, {"attrs", {{"dim", 0}}}},
            {{"op", "slice"},
             {"in", {"c"}},
             {"out", {"y"}},
             {"attrs", {{"dim", 0}, {"start", start}, {"end", start + 4}}}}}},
          {"outputs", {"y"}}}},
        {"parallel",
         {{"world", 1},
          {"tensors",
           {{"r0.a", {{"shape", {4}}, {"dtype", "f32"}, {"rank", 0}, {"of", {{"tensor", "a"}}}}},
            {"r0.b", {{"shape", {4}}, {"dtype", "f32"}, {"rank", 0}, {"of", {{"tensor", "b"}}}}},
            {"r0.y", {{"shape", {4}}, {"dtype", "f32"}, {"rank", 0}, {"of", {{"tensor", "y"}}}}}}},
          {"inputs", {"r0.a", "r0.b"}},
          {"ops", {{{"op", "neg"}, {"in", {"r0.b"}}, {"out", {"r0.y"}}, {"rank", 0}}}},
          {"outputs", {"r0.y"}}}}};
    return plan.dump(1);
  };
  testing::MapStore store;
  VerifyOptions options;
  options.store = &store;
  PlanMemo memo;
  // y = exp(a), claimed as -b: refuted.
  Report first = verify_text_with_memo("plan.json", plan_with_slice(0), options, memo);
  ASSERT_EQ(first.verdict, Verdict::NotEquivalent) << report_to_text(first);
  // y = -b after the edit: equivalent (with the cone of the slice 0:4, -b
  // would be a free leaf and the claim refuted).
  Report edit = verify_text_with_memo("plan.json", plan_with_slice(4), options, memo);
  EXPECT_EQ(edit.verdict, Verdict::Equivalent) << report_to_text(edit);
  expect_same_answer(edit, full_verification(plan_with_slice(4), options));
  Report back = verify_text_with_memo("plan.json", plan_with_slice(0), options, memo);
  expect_same_answer(back, first);
}

}  // namespace
}  // namespace shardproof
