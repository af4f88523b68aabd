// The plan parser: every rule of plan-format-v1.md (and the project's
// additions in docs/plan-format.md) broken once, checking rule id, JSON
// pointer, message and, in places, line:column; plus the IR a valid plan
// gives and robustness against malformed input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "engine/core/diagnostic.h"
#include "engine/format/plan_parser.h"
#include "engine/json/json_source.h"
#include "engine/ops/op_registry.h"

namespace shardproof {
namespace {

using nlohmann::json;

const std::string kData = std::string(SHARDPROOF_SOURCE_DIR) + "/tests/data/plans/";

// y = x @ w; z = y + b; gw = x^T @ y. Parallel: rows of x over 2 ranks, gw as
// two partial sums joined by an all_reduce.
json base_plan() {
  json t = json::object();
  auto tensor = [](json shape, int rank, json of) {
    json d = {{"shape", shape}, {"dtype", "f32"}, {"rank", rank}};
    if (!of.is_null()) d["of"] = of;
    return d;
  };
  for (int r = 0; r < 2; ++r) {
    std::string p = "r" + std::to_string(r) + ".";
    json rows = json::array({2 * r, 2 * r + 2});
    t[p + "x"] = tensor({2, 6}, r, {{"tensor", "x"}, {"slice", {rows, {0, 6}}}});
    t[p + "w"] = tensor({6, 8}, r, {{"tensor", "w"}});
    t[p + "b"] = tensor({2, 8}, r, {{"tensor", "b"}, {"slice", {rows, {0, 8}}}});
    t[p + "y"] = tensor({2, 8}, r, {{"tensor", "y"}, {"slice", {rows, {0, 8}}}});
    t[p + "z"] = tensor({2, 8}, r, {{"tensor", "z"}, {"slice", {rows, {0, 8}}}});
    t[p + "gw.p"] = tensor({6, 8}, r, {{"tensor", "gw"}, {"part", {r, 2}}});
    t[p + "gw"] = tensor({6, 8}, r, {{"tensor", "gw"}});
  }
  json ops = json::array();
  for (int r = 0; r < 2; ++r) {
    std::string p = "r" + std::to_string(r) + ".";
    ops.push_back(
        {{"name", p + "fc"}, {"op", "matmul"}, {"in", {p + "x", p + "w"}}, {"out", {p + "y"}}});
    ops.push_back(
        {{"name", p + "bias"}, {"op", "add"}, {"in", {p + "y", p + "b"}}, {"out", {p + "z"}}});
    ops.push_back({{"name", p + "wgrad"},
                   {"op", "matmul"},
                   {"in", {p + "x", p + "y"}},
                   {"out", {p + "gw.p"}},
                   {"attrs", {{"transpose_a", true}}}});
  }
  ops.push_back({{"name", "ar"},
                 {"op", "all_reduce"},
                 {"in", {"r0.gw.p", "r1.gw.p"}},
                 {"out", {"r0.gw", "r1.gw"}},
                 {"group", {0, 1}}});
  json logical = {{"tensors",
                   {{"x", {{"shape", {4, 6}}, {"dtype", "f32"}}},
                    {"w", {{"shape", {6, 8}}, {"dtype", "f32"}}},
                    {"b", {{"shape", {4, 8}}, {"dtype", "f32"}}},
                    {"y", {{"shape", {4, 8}}, {"dtype", "f32"}}},
                    {"z", {{"shape", {4, 8}}, {"dtype", "f32"}}},
                    {"gw", {{"shape", {6, 8}}, {"dtype", "f32"}}}}},
                  {"inputs", {"x", "w", "b"}},
                  {"ops",
                   {{{"name", "fc"}, {"op", "matmul"}, {"in", {"x", "w"}}, {"out", {"y"}}},
                    {{"name", "bias"}, {"op", "add"}, {"in", {"y", "b"}}, {"out", {"z"}}},
                    {{"name", "wgrad"},
                     {"op", "matmul"},
                     {"in", {"x", "y"}},
                     {"out", {"gw"}},
                     {"attrs", {{"transpose_a", true}}}}}},
                  {"outputs", {"z", "gw"}}};
  return {{"format", "shardproof-plan/1"},
          {"name", "base"},
          {"meta", {{"dp", 2}}},
          {"logical", logical},
          {"parallel",
           {{"world", 2},
            {"tensors", t},
            {"inputs", {"r0.x", "r0.w", "r0.b", "r1.x", "r1.w", "r1.b"}},
            {"ops", ops},
            {"outputs", {"r0.z", "r1.z", "r0.gw", "r1.gw"}}}}};
}

ParseResult parse(const json& plan) {
  return parse_plan_text(plan.dump(1), "plan.json", "");
}

// Parses and expects an invalid plan with this rule and pointer.
Diagnostic invalid(const json& plan, const std::string& rule, const std::string& pointer) {
  ParseResult r = parse(plan);
  EXPECT_TRUE(r.io_error.empty()) << r.io_error;
  EXPECT_FALSE(r.plan.has_value()) << "plan was accepted";
  if (!r.error) return {};
  EXPECT_EQ(r.error->rule, rule) << r.error->to_string();
  EXPECT_EQ(r.error->pointer, pointer) << r.error->to_string();
  EXPECT_EQ(r.error->file, "plan.json");
  EXPECT_GT(r.error->line, 0) << r.error->to_string();
  EXPECT_GT(r.error->column, 0) << r.error->to_string();
  return *r.error;
}

Diagnostic invalid_text(const std::string& text, const std::string& rule) {
  ParseResult r = parse_plan_text(text, "plan.json", "");
  EXPECT_FALSE(r.plan.has_value());
  EXPECT_TRUE(r.io_error.empty()) << r.io_error;
  if (!r.error) return {};
  EXPECT_EQ(r.error->rule, rule) << r.error->to_string();
  return *r.error;
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

json& ptensor(json& p, const std::string& name) {
  return p["parallel"]["tensors"][name];
}
json& pop(json& p, size_t i) {
  return p["parallel"]["ops"][i];
}

// ---- the valid plan and the IR it gives ----

TEST(PlanParser, BasePlanIsValid) {
  ParseResult r = parse(base_plan());
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  const Plan& p = *r.plan;
  EXPECT_EQ(p.format, "shardproof-plan/1");
  EXPECT_EQ(p.name, "base");
  EXPECT_EQ(p.meta_json, "{\"dp\":2}");
  EXPECT_EQ(p.path, "plan.json");
  EXPECT_FALSE(p.logical.parallel);
  EXPECT_TRUE(p.parallel.parallel);
  EXPECT_EQ(p.parallel.world, 2);
  EXPECT_EQ(p.logical.source_file, "plan.json");
  ASSERT_EQ(p.logical.outputs.size(), 2u);
  EXPECT_EQ(p.logical.tensors[p.logical.outputs[0]].name, "z");
  int y = p.logical.find("y");
  ASSERT_GE(y, 0);
  EXPECT_EQ(p.logical.producer[y], 0);
  EXPECT_EQ(p.logical.producer[p.logical.find("x")], -1);
  EXPECT_EQ(p.logical.topo_order, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p.logical.ops[2].attrs.at("transpose_a").kind, Attr::Kind::Bool);
  EXPECT_EQ(p.logical.ops[2].pointer, "/logical/ops/2");

  const Graph& g = p.parallel;
  const Op& ar = g.ops[6];
  EXPECT_EQ(ar.op, "all_reduce");
  EXPECT_EQ(ar.group, (std::vector<int>{0, 1}));
  EXPECT_EQ(ar.rank, -1);
  EXPECT_EQ(g.ops[3].rank, 1);
  EXPECT_EQ(g.ops[0].rank, 0);
  const TensorDecl& w = g.tensors[g.find("r1.w")];
  ASSERT_TRUE(w.of);
  EXPECT_EQ(w.of->slice, (SliceSpec{{0, 6}, {0, 8}}));  // default: the whole tensor
  EXPECT_FALSE(w.of->has_part);
  const TensorDecl& gwp = g.tensors[g.find("r1.gw.p")];
  ASSERT_TRUE(gwp.of);
  EXPECT_TRUE(gwp.of->has_part);
  EXPECT_EQ(gwp.of->part_k, 1);
  EXPECT_EQ(gwp.of->part_n, 2);
  EXPECT_EQ(gwp.rank, 1);
  EXPECT_EQ(gwp.pointer, "/parallel/tensors/r1.gw.p");
  EXPECT_EQ(g.find("nope"), -1);
}

TEST(PlanParser, NameAndMetaAreOptional) {
  json p = base_plan();
  p.erase("name");
  p.erase("meta");
  ParseResult r = parse(p);
  ASSERT_TRUE(r.plan) << r.error->to_string();
  EXPECT_EQ(r.plan->name, "");
  EXPECT_EQ(r.plan->meta_json, "{}");
}

TEST(PlanParser, MetaIsFreeFormAndKeptExactly) {
  json p = base_plan();
  ParseResult r = parse_plan_text(
      R"({"format": "shardproof-plan/1", "meta": {"lr": 0.10, "tags": ["a", null, {"x": 1e3}]},)" +
          p.dump().substr(1),
      "plan.json", "");
  ASSERT_FALSE(r.plan) << "duplicate meta key must be rejected";
  p.erase("meta");
  std::string text = p.dump();
  text.insert(1, R"("meta": {"lr": 0.10, "tags": ["a", null, {"x": 1e3}]}, )");
  r = parse_plan_text(text, "plan.json", "");
  ASSERT_TRUE(r.plan) << r.error->to_string();
  EXPECT_EQ(r.plan->meta_json, R"({"lr":0.10,"tags":["a",null,{"x":1e3}]})");
}

TEST(PlanParser, TopologicalOrderIsStableAndOpsMayComeInAnyOrder) {
  // c = neg(b) listed before b = neg(a): order must be b's op first, then c's;
  // d = neg(a) has no dependency and keeps its place relative to the others.
  std::string text = R"({"format": "shardproof-plan/1",
 "logical": {"tensors": {"a": {"shape": [2], "dtype": "f32"}, "b": {"shape": [2], "dtype": "f32"},
   "c": {"shape": [2], "dtype": "f32"}, "d": {"shape": [2], "dtype": "f32"}},
  "inputs": ["a"],
  "ops": [{"op": "add", "in": ["b", "b"], "out": ["c"]},
          {"op": "add", "in": ["a", "a"], "out": ["b"]},
          {"op": "add", "in": ["a", "a"], "out": ["d"]}],
  "outputs": ["c", "d"]},
 "parallel": {"world": 1, "tensors": {"p": {"shape": [2], "dtype": "f32", "rank": 0, "of": {"tensor": "a"}},
   "q": {"shape": [2], "dtype": "f32", "rank": 0, "of": {"tensor": "c"}},
   "s": {"shape": [2], "dtype": "f32", "rank": 0, "of": {"tensor": "d"}}},
  "inputs": ["p"],
  "ops": [{"op": "add", "in": ["p", "p"], "out": ["q"], "rank": 0},
          {"op": "add", "in": ["p", "p"], "out": ["s"]}],
  "outputs": ["q", "s"]}})";
  ParseResult r = parse_plan_text(text, "plan.json", "");
  ASSERT_TRUE(r.plan) << r.error->to_string();
  EXPECT_EQ(r.plan->logical.topo_order, (std::vector<int>{1, 0, 2}));
  EXPECT_EQ(r.plan->logical.ops[0].display_name(), "#0 add");
  // Tensors keep their declaration order.
  EXPECT_EQ(r.plan->logical.tensors[1].name, "b");
  EXPECT_EQ(r.plan->logical.tensor_index.at("c"), 2);
  EXPECT_EQ(r.plan->parallel.ops[0].rank, 0);
}

TEST(PlanParser, AttributeNumbersAreExact) {
  // A JSON number is the decimal it is written as; "p/q" is an exact fraction.
  std::string text = R"({"format": "shardproof-plan/1",
 "logical": {"tensors": {"a": {"shape": [2], "dtype": "f32"}, "b": {"shape": [2], "dtype": "f32"}},
  "inputs": ["a"], "ops": [{"op": "scale", "in": ["a"], "out": ["b"], "attrs": {"factor": 0.1}}],
  "outputs": ["b"]},
 "parallel": {"world": 1, "tensors": {"p": {"shape": [2], "dtype": "f32", "rank": 0, "of": {"tensor": "a"}},
   "q": {"shape": [2], "dtype": "f32", "rank": 0, "of": {"tensor": "b"}}},
  "inputs": ["p"], "ops": [{"op": "scale", "in": ["p"], "out": ["q"], "attrs": {"factor": "-1/3"}}],
  "outputs": ["q"]}})";
  if (!OpRegistry::instance().find("scale")) GTEST_SKIP() << "scale not registered yet";
  ParseResult r = parse_plan_text(text, "plan.json", "");
  ASSERT_TRUE(r.plan) << r.error->to_string();
  const Attr& f = r.plan->logical.ops[0].attrs.at("factor");
  ASSERT_EQ(f.kind, Attr::Kind::Number);
  EXPECT_EQ(f.number, Rational(1, 10));  // not the double nearest 0.1
  const Attr& g = r.plan->parallel.ops[0].attrs.at("factor");
  ASSERT_EQ(g.kind, Attr::Kind::Number);
  EXPECT_EQ(g.number, Rational(-1, 3));
}

TEST(PlanParser, InferErrorsNameTheOp) {
  // A non-fraction string stays a string, which matmul's rule rejects.
  json p = base_plan();
  pop(p, 0)["attrs"] = {{"transpose_a", "yes"}};
  Diagnostic d = invalid(p, "op-infer", "/parallel/ops/0");
  EXPECT_HAS(d.message, "matmul \"r0.fc\"");
}

TEST(PlanParser, ExamplesParse) {
  for (const char* name : {"tp2-ffn.json", "dp2-sgd.json"}) {
    ParseResult r = parse_plan_file(kData + "examples/" + name);
    ASSERT_TRUE(r.plan) << name << ": " << (r.error ? r.error->to_string() : r.io_error);
  }
  ParseResult r = parse_plan_file(kData + "examples/dp2-sgd.json");
  EXPECT_EQ(r.plan->logical.source_file, kData + "examples/dp2-sgd.logical.json");
  EXPECT_EQ(r.plan->parallel.source_file, kData + "examples/dp2-sgd.json");
  const Attr& lr = r.plan->logical.ops[1].attrs.at("lr");
  EXPECT_EQ(lr.number, Rational(1, 100));
}

TEST(PlanParser, BothGraphsMayBeReferencedFromSubfolders) {
  ParseResult r = parse_plan_file(kData + "refs/parallel-ref.json");
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  EXPECT_EQ(r.plan->parallel.source_file, kData + "refs/sub/identity.parallel.json");
  EXPECT_EQ(r.plan->parallel.tensors[1].of->slice, (SliceSpec{{1, 2}, {0, 3}}));
  // Pointers in a graph file start at that file's root.
  EXPECT_EQ(r.plan->parallel.tensors[1].pointer, "/tensors/r1.x");
}

// ---- files and JSON ----

TEST(PlanParser, UnreadableFileIsAnIoError) {
  ParseResult r = parse_plan_file(kData + "does-not-exist.json");
  EXPECT_FALSE(r.plan);
  EXPECT_FALSE(r.error);
  EXPECT_HAS(r.io_error, "does-not-exist.json");
  r = parse_plan_file(kData);  // a directory
  EXPECT_FALSE(r.io_error.empty());
}

TEST(PlanParser, ErrorsInAReferencedGraphNameThatFile) {
  ParseResult r = parse_plan_file(kData + "refs/bad-logical.json");
  ASSERT_TRUE(r.error) << r.io_error;
  EXPECT_EQ(r.error->rule, "unknown-key");
  EXPECT_EQ(r.error->file, kData + "refs/bad-logical.graph.json");
  EXPECT_EQ(r.error->pointer, "/tensors/x/colour");
  EXPECT_EQ(r.error->line, 3);
  EXPECT_EQ(r.error->column, 41);
  EXPECT_HAS(r.error->message, "\"colour\"");
}

TEST(PlanParser, MissingReferencedGraph) {
  ParseResult r = parse_plan_file(kData + "refs/missing-logical.json");
  ASSERT_TRUE(r.error) << r.io_error;
  EXPECT_EQ(r.error->rule, "graph-ref");
  EXPECT_EQ(r.error->file, kData + "refs/missing-logical.json");
  EXPECT_EQ(r.error->pointer, "/logical");
  EXPECT_EQ(r.error->line, 3);
  EXPECT_EQ(r.error->column, 14);
  EXPECT_HAS(r.error->message, "no-such-graph.json");
}

TEST(PlanParser, MalformedJsonIsADiagnostic) {
  Diagnostic d = invalid_text("", "json");
  EXPECT_HAS(d.message, "end of input");
  invalid_text("{\"format\": \"shardproof-plan/1\", \"logical\": {", "json");
  invalid_text(std::string("\x00\xff\xfe garbage\x01", 13), "json");
  invalid_text("{} trailing", "json");
  invalid_text("[1, 2,]", "json");
  d = invalid_text("{\n  \"format\": tru\n}", "json");
  EXPECT_EQ(d.line, 2);
  d = invalid_text(std::string(100000, '['), "json");
  EXPECT_HAS(d.message, "nesting deeper");
  invalid_text("{\"format\": 1e999}", "json");  // overflows: not a number JSON can carry
}

TEST(PlanParser, DuplicateKeysAreRejected) {
  Diagnostic d = invalid_text(
      "{\"format\": \"shardproof-plan/1\",\n \"logical\": {\"tensors\": {\"x\": {}, \"x\": {}}}}",
      "duplicate-key");
  EXPECT_EQ(d.pointer, "/logical/tensors/x");
  EXPECT_EQ(d.line, 2);
  EXPECT_EQ(d.column, 35);
}

TEST(PlanParser, TruncationsAndCorruptionsNeverCrash) {
  std::string text = base_plan().dump(1);
  for (size_t n = 0; n < text.size(); n += 7) {
    ParseResult r = parse_plan_text(text.substr(0, n), "plan.json", "");
    EXPECT_TRUE(r.error.has_value()) << n;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = static_cast<char>(rng() % 256);
    ParseResult r = parse_plan_text(t, "plan.json", "");
    EXPECT_TRUE(r.plan.has_value() || r.error.has_value() || !r.io_error.empty());
  }
}

TEST(PlanParser, HugeNumbersAreDiagnostics) {
  json p = base_plan();
  std::string text = p.dump();
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  Diagnostic d = invalid_text(replace("\"world\":2", "\"world\":99999999999999999999999"), "world");
  d = invalid_text(replace("\"shape\":[4,6]", "\"shape\":[4,1e30]"), "shape");
  d = invalid_text(replace("\"shape\":[4,6]", "\"shape\":[4294967296,4294967296,4]"), "shape");
  EXPECT_HAS(d.message, "elements");
  d = invalid_text(replace("\"transpose_a\":true", "\"transpose_a\":1e-5000"), "attr-value");
}

// ---- top level ----

TEST(PlanParser, FormatIsRequiredAndExact) {
  json p = base_plan();
  p.erase("format");
  Diagnostic d = invalid(p, "format", "/format");
  EXPECT_HAS(d.message, "missing");
  p["format"] = "shardproof-plan/2";
  d = invalid(p, "format", "/format");
  EXPECT_HAS(d.message,
             "expected \"shardproof-plan/1\" or \"shardproof-plan/1.1\", found string "
             "\"shardproof-plan/2\"");
  p["format"] = 1;
  invalid(p, "format", "/format");
}

TEST(PlanParser, WrongTypes) {
  invalid_text("[]", "type");
  json p = base_plan();
  p["name"] = 3;
  Diagnostic d = invalid(p, "type", "/name");
  EXPECT_HAS(d.message, "expected a string, found number 3");
  p = base_plan();
  p["logical"] = 7;
  invalid(p, "type", "/logical");
  p = base_plan();
  p["parallel"]["tensors"] = json::array();
  invalid(p, "type", "/parallel/tensors");
  p = base_plan();
  pop(p, 0)["in"] = "r0.x";
  invalid(p, "type", "/parallel/ops/0/in");
}

TEST(PlanParser, MissingKeys) {
  json p = base_plan();
  p.erase("parallel");
  invalid(p, "missing-key", "/parallel");
  p = base_plan();
  p["logical"].erase("ops");
  invalid(p, "missing-key", "/logical/ops");
  p = base_plan();
  pop(p, 1).erase("op");
  Diagnostic d = invalid(p, "missing-key", "/parallel/ops/1/op");
  EXPECT_HAS(d.message, "\"op\"");
  p = base_plan();
  ptensor(p, "r0.x")["of"].erase("tensor");
  invalid(p, "lineage", "/parallel/tensors/r0.x/of/tensor");
}

TEST(PlanParser, UnknownKeysAtEveryLevel) {
  for (const std::string at :
       {"", "/logical", "/parallel", "/logical/tensors/x", "/parallel/tensors/r0.x",
        "/logical/ops/0", "/parallel/ops/6", "/parallel/tensors/r0.x/of"}) {
    json p = base_plan();
    p[json::json_pointer(at)]["bogus"] = 1;
    Diagnostic d = invalid(p, "unknown-key", at + "/bogus");
    EXPECT_HAS(d.message, "unknown key \"bogus\"");
  }
}

// ---- graphs ----

TEST(PlanParser, WorldOnlyAndRequiredInParallel) {
  json p = base_plan();
  p["logical"]["world"] = 1;
  Diagnostic d = invalid(p, "world", "/logical/world");
  EXPECT_HAS(d.message, "parallel graph only");
  p = base_plan();
  p["parallel"].erase("world");
  invalid(p, "world", "/parallel/world");
  p["parallel"]["world"] = 0;
  d = invalid(p, "world", "/parallel/world");
  EXPECT_HAS(d.message, "expected an integer in [1, 1048576], found 0");
  p["parallel"]["world"] = 1.5;
  invalid(p, "world", "/parallel/world");
  p["parallel"]["world"] = "2";
  invalid(p, "world", "/parallel/world");
}

TEST(PlanParser, LogicalTensorsHaveNoRankOrLineage) {
  json p = base_plan();
  p["logical"]["tensors"]["x"]["rank"] = 0;
  invalid(p, "rank", "/logical/tensors/x/rank");
  p = base_plan();
  p["logical"]["tensors"]["x"]["of"] = {{"tensor", "x"}};
  invalid(p, "lineage", "/logical/tensors/x/of");
}

TEST(PlanParser, DtypeIsRequiredAndKnown) {
  json p = base_plan();
  p["logical"]["tensors"]["w"].erase("dtype");
  invalid(p, "dtype", "/logical/tensors/w/dtype");
  p["logical"]["tensors"]["w"]["dtype"] = "float32";
  Diagnostic d = invalid(p, "dtype", "/logical/tensors/w/dtype");
  EXPECT_HAS(d.message, "found string \"float32\"");
}

TEST(PlanParser, ShapeIsAListOfNonNegativeIntegers) {
  json p = base_plan();
  p["logical"]["tensors"]["w"]["shape"] = {6, -8};
  Diagnostic d = invalid(p, "shape", "/logical/tensors/w/shape/1");
  EXPECT_HAS(d.message, "non-negative integer, found -8");
  p["logical"]["tensors"]["w"]["shape"] = {6, 8.5};
  invalid(p, "shape", "/logical/tensors/w/shape/1");
  p["logical"]["tensors"]["w"]["shape"] = 6;
  invalid(p, "shape", "/logical/tensors/w/shape");
  p["logical"]["tensors"]["w"].erase("shape");
  invalid(p, "shape", "/logical/tensors/w/shape");
}

TEST(PlanParser, ParallelTensorsHaveARankInTheWorld) {
  json p = base_plan();
  ptensor(p, "r1.w").erase("rank");
  invalid(p, "rank", "/parallel/tensors/r1.w/rank");
  ptensor(p, "r1.w")["rank"] = 2;
  Diagnostic d = invalid(p, "rank", "/parallel/tensors/r1.w/rank");
  EXPECT_HAS(d.message, "[0, 1], found 2");
  ptensor(p, "r1.w")["rank"] = -1;
  invalid(p, "rank", "/parallel/tensors/r1.w/rank");
}

TEST(PlanParser, NamesMustBeDeclared) {
  json p = base_plan();
  p["logical"]["inputs"][1] = "v";
  Diagnostic d = invalid(p, "undeclared-tensor", "/logical/inputs/1");
  EXPECT_HAS(d.message, "\"v\"");
  p = base_plan();
  p["logical"]["outputs"][0] = "zz";
  invalid(p, "undeclared-tensor", "/logical/outputs/0");
  p = base_plan();
  pop(p, 2)["in"][1] = "r0.q";
  invalid(p, "undeclared-tensor", "/parallel/ops/2/in/1");
  p = base_plan();
  pop(p, 2)["out"][0] = "r0.q";
  invalid(p, "undeclared-tensor", "/parallel/ops/2/out/0");
}

TEST(PlanParser, StaticSingleAssignment) {
  json p = base_plan();
  p["logical"]["ops"][1]["out"] = {"y"};  // y produced twice
  Diagnostic d = invalid(p, "ssa", "/logical/ops/1/out/0");
  EXPECT_HAS(d.message, "already the output of op fc");
  p = base_plan();
  p["logical"]["ops"][0]["out"] = {"x"};  // an input produced by an op
  d = invalid(p, "ssa", "/logical/ops/0/out/0");
  EXPECT_HAS(d.message, "graph input and also the output");
  p = base_plan();
  p["logical"]["inputs"].push_back("x");
  invalid(p, "ssa", "/logical/inputs/3");
  p = base_plan();
  p["logical"]["ops"][0]["out"] = json::array();
  invalid(p, "ssa", "/logical/ops/0/out");
}

TEST(PlanParser, DeclaredButUnusedTensor) {
  json p = base_plan();
  p["logical"]["tensors"]["extra"] = {{"shape", {1}}, {"dtype", "f32"}};
  Diagnostic d = invalid(p, "dangling-tensor", "/logical/tensors/extra");
  EXPECT_HAS(d.message, "neither an input nor any op's output");
}

TEST(PlanParser, OutputsNonEmptyAndUnique) {
  json p = base_plan();
  p["logical"]["outputs"] = json::array();
  invalid(p, "outputs", "/logical/outputs");
  p = base_plan();
  p["logical"]["outputs"].push_back("z");
  invalid(p, "outputs", "/logical/outputs/2");
}

TEST(PlanParser, OpNamesAreUnique) {
  json p = base_plan();
  pop(p, 4)["name"] = "r0.fc";
  Diagnostic d = invalid(p, "op-name", "/parallel/ops/4/name");
  EXPECT_HAS(d.message, "already used by op 0");
  p = base_plan();
  pop(p, 4)["name"] = "";
  invalid(p, "op-name", "/parallel/ops/4/name");
}

TEST(PlanParser, CyclesAreReported) {
  json p = base_plan();
  // fc reads z, which bias computes from y, which fc computes.
  p["logical"]["ops"][0]["in"] = {"x", "z"};
  p["logical"]["inputs"] = {"x", "b"};
  p["logical"]["tensors"].erase("w");
  p["logical"]["tensors"]["z"]["shape"] = {4, 8};
  Diagnostic d = invalid(p, "cycle", "/logical/ops/0");
  EXPECT_HAS(d.message, "\"fc\" --y--> \"bias\" --z--> \"fc\"");
}

TEST(PlanParser, SelfLoopIsACycle) {
  json p = base_plan();
  p["logical"]["ops"][1]["in"] = {"y", "z"};
  p["logical"]["inputs"] = {"x", "w"};
  p["logical"]["tensors"].erase("b");
  Diagnostic d = invalid(p, "cycle", "/logical/ops/1");
  EXPECT_HAS(d.message, "\"bias\" --z--> \"bias\"");
}

TEST(PlanParser, UnknownOperator) {
  json p = base_plan();
  p["logical"]["ops"][1]["op"] = "frobnicate";
  Diagnostic d = invalid(p, "unknown-op", "/logical/ops/1/op");
  EXPECT_HAS(d.message, "unknown operator \"frobnicate\"");
}

TEST(PlanParser, CollectivesOnlyInTheParallelGraph) {
  json p = base_plan();
  p["logical"]["ops"][1]["op"] = "all_reduce";
  invalid(p, "collective-in-logical", "/logical/ops/1/op");
  p = base_plan();
  p["logical"]["ops"][1]["group"] = {0};
  invalid(p, "group", "/logical/ops/1/group");
  p = base_plan();
  p["logical"]["ops"][1]["rank"] = 0;
  invalid(p, "rank", "/logical/ops/1/rank");
}

TEST(PlanParser, CollectiveGroups) {
  json p = base_plan();
  pop(p, 6).erase("group");
  invalid(p, "group", "/parallel/ops/6/group");
  p = base_plan();
  pop(p, 6)["group"] = {0, 0};
  Diagnostic d = invalid(p, "group", "/parallel/ops/6/group/1");
  EXPECT_HAS(d.message, "appears twice");
  pop(p, 6)["group"] = {0, 2};
  invalid(p, "group", "/parallel/ops/6/group/1");
  pop(p, 6)["group"] = {0};
  d = invalid(p, "group", "/parallel/ops/6");
  EXPECT_HAS(d.message, "one input and one output per group rank (1)");
  pop(p, 6)["group"] = json::array();
  invalid(p, "group", "/parallel/ops/6/group");
  p = base_plan();
  pop(p, 6)["rank"] = 0;
  invalid(p, "group", "/parallel/ops/6/rank");
  p = base_plan();
  pop(p, 0)["group"] = {0};
  d = invalid(p, "group", "/parallel/ops/0/group");
  EXPECT_HAS(d.message, "only collectives");
}

TEST(PlanParser, CollectivePlacementFollowsGroupOrder) {
  json p = base_plan();
  pop(p, 6)["group"] = {1, 0};
  Diagnostic d = invalid(p, "placement", "/parallel/ops/6/in/0");
  EXPECT_HAS(d.message, "must live on rank 1 (group[0]); \"r0.gw.p\" is on rank 0");
  p = base_plan();
  pop(p, 6)["out"] = {"r1.gw", "r0.gw"};
  invalid(p, "placement", "/parallel/ops/6/out/0");
}

TEST(PlanParser, SendMovesOneTensorFromSrcToDst) {
  if (!OpRegistry::instance().find("send")) GTEST_SKIP() << "send not registered yet";
  // The all_reduce becomes a send of r0's partial to rank 1 (claims are not
  // checked by the parser, only structure).
  json p = base_plan();
  p["parallel"]["tensors"].erase("r0.gw");
  p["parallel"]["outputs"] = {"r0.z", "r1.z", "r1.gw"};
  pop(p, 6) = {{"op", "send"}, {"in", {"r0.gw.p"}}, {"out", {"r1.gw"}}, {"group", {0, 1}}};
  ParseResult r = parse(p);
  ASSERT_TRUE(r.plan) << r.error->to_string();
  EXPECT_EQ(r.plan->parallel.ops[6].group, (std::vector<int>{0, 1}));
  pop(p, 6)["group"] = {1, 0};
  Diagnostic d = invalid(p, "placement", "/parallel/ops/6/in/0");
  EXPECT_HAS(d.message, "must live on rank 1 (group[0])");
  pop(p, 6)["group"] = {0};
  d = invalid(p, "group", "/parallel/ops/6");
  EXPECT_HAS(d.message, "send needs group [src, dst], one input and one output");
  pop(p, 6)["group"] = {0, 1};
  ptensor(p, "r1.gw")["rank"] = 0;
  d = invalid(p, "placement", "/parallel/ops/6/out/0");
  EXPECT_HAS(d.message, "out[0] must live on rank 1 (group[1])");
}

TEST(PlanParser, LocalOpsRunOnOneRank) {
  json p = base_plan();
  pop(p, 0)["in"] = {"r0.x", "r1.w"};
  Diagnostic d = invalid(p, "placement", "/parallel/ops/0/in/1");
  EXPECT_HAS(d.message, "\"r1.w\" is on rank 1 but \"r0.x\" is on rank 0");
  p = base_plan();
  pop(p, 0)["rank"] = 1;
  invalid(p, "placement", "/parallel/ops/0/rank");
  pop(p, 0)["rank"] = 5;
  invalid(p, "rank", "/parallel/ops/0/rank");
}

TEST(PlanParser, ShapeRulesOfOperators) {
  json p = base_plan();
  p["logical"]["tensors"]["w"]["shape"] = {5, 8};
  Diagnostic d = invalid(p, "op-infer", "/logical/ops/0");
  EXPECT_HAS(d.message, "matmul \"fc\": ");
  p = base_plan();
  p["logical"]["tensors"]["y"]["shape"] = {4, 9};
  p["logical"]["tensors"]["z"]["shape"] = {4, 9};
  p["logical"]["tensors"]["b"]["shape"] = {4, 9};
  d = invalid(p, "op-shape", "/logical/tensors/y/shape");
  EXPECT_HAS(d.message, "declared with shape [4, 9] but matmul \"fc\" gives output 0 shape [4, 8]");
  p = base_plan();
  p["logical"]["tensors"]["z"]["dtype"] = "i64";
  d = invalid(p, "op-dtype", "/logical/tensors/z/dtype");
  EXPECT_HAS(d.message, "declared i64 (integer)");
  p = base_plan();
  p["logical"]["tensors"]["z"]["dtype"] = "f16";  // same class: fine
  EXPECT_TRUE(parse(p).plan);
  p = base_plan();
  pop(p, 6)["attrs"] = {{"reduce", "product"}};
  invalid(p, "op-infer", "/parallel/ops/6");
}

TEST(PlanParser, AttributeValues) {
  json p = base_plan();
  pop(p, 2)["attrs"] = {{"transpose_a", nullptr}};
  invalid(p, "attr-value", "/parallel/ops/2/attrs/transpose_a");
  pop(p, 2)["attrs"] = {{"transpose_a", {{"x", 1}}}};
  invalid(p, "attr-value", "/parallel/ops/2/attrs/transpose_a");
  pop(p, 2)["attrs"] = {{"transpose_a", {true, {1, nullptr}}}};
  invalid(p, "attr-value", "/parallel/ops/2/attrs/transpose_a/1/1");
  pop(p, 2)["attrs"] = {{"transpose_a", "1/0"}};
  invalid(p, "attr-value", "/parallel/ops/2/attrs/transpose_a");
  pop(p, 2)["attrs"] = json::array();
  invalid(p, "type", "/parallel/ops/2/attrs");
}

TEST(PlanParser, MapFnHasOneArityInThePlan) {
  if (!OpRegistry::instance().find("map")) GTEST_SKIP() << "map not registered yet";
  json p = base_plan();
  // Logical: z = map{f}(y, b); parallel: r1.z = map{f}(r1.y) would change
  // shapes; instead use arity 2 in logical and arity 1 in parallel on r0.
  p["logical"]["ops"][1]["op"] = "map";
  p["logical"]["ops"][1]["attrs"] = {{"fn", "f"}};
  pop(p, 1)["op"] = "map";
  pop(p, 1)["attrs"] = {{"fn", "f"}};
  pop(p, 4)["op"] = "map";
  pop(p, 4)["attrs"] = {{"fn", "f"}};
  ParseResult ok = parse(p);
  ASSERT_TRUE(ok.plan) << ok.error->to_string();
  pop(p, 4)["in"] = {"r1.y"};
  p["parallel"]["inputs"] = {"r0.x", "r0.w", "r0.b", "r1.x", "r1.w"};
  p["parallel"]["tensors"].erase("r1.b");
  Diagnostic d = invalid(p, "map-arity", "/parallel/ops/4/attrs/fn");
  EXPECT_HAS(d.message, "used here with 1 input(s) but with 2 at plan.json:");
  EXPECT_HAS(d.message, "(/logical/ops/1)");
}

// ---- lineage ----

TEST(PlanParser, LineageNamesALogicalTensor) {
  json p = base_plan();
  ptensor(p, "r0.y")["of"]["tensor"] = "h";
  Diagnostic d = invalid(p, "lineage", "/parallel/tensors/r0.y/of/tensor");
  EXPECT_HAS(d.message, "no tensor \"h\"");
  p = base_plan();
  ptensor(p, "r0.y")["of"] = "y";
  invalid(p, "type", "/parallel/tensors/r0.y/of");
}

TEST(PlanParser, LineageSlices) {
  json p = base_plan();
  ptensor(p, "r0.y")["of"]["slice"] = {{0, 2}};
  Diagnostic d = invalid(p, "lineage-slice", "/parallel/tensors/r0.y/of/slice");
  EXPECT_HAS(d.message, "one [lo, hi] per dimension of \"y\" [4, 8], i.e. 2; found 1");
  ptensor(p, "r0.y")["of"]["slice"] = {{0, 2}, {0, 9}};
  invalid(p, "lineage-slice", "/parallel/tensors/r0.y/of/slice/1/1");
  ptensor(p, "r0.y")["of"]["slice"] = {{2, 0}, {0, 8}};
  invalid(p, "lineage-slice", "/parallel/tensors/r0.y/of/slice/0/1");
  ptensor(p, "r0.y")["of"]["slice"] = {{-1, 1}, {0, 8}};
  invalid(p, "lineage-slice", "/parallel/tensors/r0.y/of/slice/0/0");
  ptensor(p, "r0.y")["of"]["slice"] = {{0, 2, 3}, {0, 8}};
  invalid(p, "lineage-slice", "/parallel/tensors/r0.y/of/slice/0");
}

TEST(PlanParser, LineageShapeIsTheSliceExtent) {
  json p = base_plan();
  ptensor(p, "r0.y")["of"]["slice"] = {{0, 2}, {0, 4}};
  Diagnostic d = invalid(p, "lineage-shape", "/parallel/tensors/r0.y/shape");
  EXPECT_HAS(d.message, "claims y[0:2, 0:4], whose extent is [2, 4]");
}

TEST(PlanParser, LineageDtypeClassMismatch) {
  // A parallel i64 input claiming a real logical input.
  std::string text = R"({"format": "shardproof-plan/1",
 "logical": {"tensors": {"a": {"shape": [2], "dtype": "f32"}}, "inputs": ["a"], "ops": [], "outputs": ["a"]},
 "parallel": {"world": 1, "tensors": {"p": {"shape": [2], "dtype": "i64", "rank": 0, "of": {"tensor": "a"}}},
  "inputs": ["p"], "ops": [], "outputs": ["p"]}})";
  Diagnostic d = invalid_text(text, "lineage-dtype");
  EXPECT_EQ(d.pointer, "/parallel/tensors/p/dtype");
  EXPECT_EQ(d.line, 3);
  EXPECT_EQ(d.column, 68);
  EXPECT_HAS(d.message, "\"p\" is i64 (integer) but claims \"a\", which is f32 (real)");
}

TEST(PlanParser, LineageParts) {
  json p = base_plan();
  ptensor(p, "r1.gw.p")["of"]["part"] = {2, 2};
  Diagnostic d = invalid(p, "lineage-part", "/parallel/tensors/r1.gw.p/of/part/0");
  ptensor(p, "r1.gw.p")["of"]["part"] = {0, 0};
  invalid(p, "lineage-part", "/parallel/tensors/r1.gw.p/of/part/1");
  ptensor(p, "r1.gw.p")["of"]["part"] = {1};
  invalid(p, "lineage-part", "/parallel/tensors/r1.gw.p/of/part");
}

TEST(PlanParser, Rule1ParallelInputsClaimLogicalInputs) {
  json p = base_plan();
  ptensor(p, "r1.b").erase("of");
  Diagnostic d = invalid(p, "lineage-input", "/parallel/tensors/r1.b");
  EXPECT_HAS(d.message, "parallel input \"r1.b\" has no lineage");
  p = base_plan();
  ptensor(p, "r1.w")["of"] = {{"tensor", "gw"}};
  d = invalid(p, "lineage-input", "/parallel/tensors/r1.w/of/tensor");
  EXPECT_HAS(d.message, "claims \"gw\", which is not an input of the logical graph");
}

TEST(PlanParser, Rule2ParallelOutputsHaveLineage) {
  json p = base_plan();
  ptensor(p, "r1.z").erase("of");
  Diagnostic d = invalid(p, "lineage-output", "/parallel/tensors/r1.z");
  EXPECT_HAS(d.message, "\"r1.z\"");
}

TEST(PlanParser, Rule3LogicalOutputsAreCovered) {
  json p = base_plan();
  p["parallel"]["outputs"] = {"r0.z", "r0.gw", "r1.gw"};
  Diagnostic d = invalid(p, "lineage-coverage", "/logical/outputs/0");
  EXPECT_HAS(d.message,
             "element [2, 0] of logical output \"z\" [4, 8] is covered by no parallel output");
  EXPECT_HAS(d.message, "covered: z[0:2, 0:8]");
  // A complete part set among the outputs covers.
  p = base_plan();
  p["parallel"]["outputs"] = {"r0.z", "r1.z", "r0.gw.p", "r1.gw.p"};
  ParseResult r = parse(p);
  EXPECT_TRUE(r.plan) << r.error->to_string();
  // Half a part set does not.
  p["parallel"]["outputs"] = {"r0.z", "r1.z", "r0.gw.p"};
  d = invalid(p, "lineage-coverage", "/logical/outputs/1");
  EXPECT_HAS(d.message, "element [0, 0] of logical output \"gw\"");
  EXPECT_HAS(d.message, "no parallel output covers any of it");
}

TEST(PlanParser, PartSetsMustBeComplete) {
  json p = base_plan();
  ptensor(p, "r1.gw.p")["of"]["part"] = {1, 3};
  Diagnostic d = invalid(p, "lineage-parts", "/parallel/tensors/r0.gw.p/of/part");
  EXPECT_HAS(d.message, "no parallel tensor claims gw[0:6, 0:8] part 1 of 2");
}

// ---- positions and rendering ----

TEST(PlanParser, LineAndColumnArePrecise) {
  std::string text =
      "{\n"
      "  \"format\": \"shardproof-plan/1\",\n"
      "  \"logical\": {\"tensors\": {\"x\": {\"shape\": [2, -1], \"dtype\": \"f32\"}},\n"
      "    \"inputs\": [\"x\"], \"ops\": [], \"outputs\": [\"x\"]},\n"
      "  \"parallel\": {}\n"
      "}\n";
  Diagnostic d = invalid_text(text, "shape");
  EXPECT_EQ(d.pointer, "/logical/tensors/x/shape/1");
  EXPECT_EQ(d.line, 3);
  EXPECT_EQ(d.column, 46);
  // Columns count code points, not bytes: "é" is two bytes.
  text = "{\"name\": \"caf\xC3\xA9\", \"format\": 2}";
  d = invalid_text(text, "format");
  EXPECT_EQ(d.line, 1);
  EXPECT_EQ(d.column, 28);
  // A missing key points at the object that lacks it.
  text =
      "{\"format\": \"shardproof-plan/1\",\n \"logical\":\n   {\"tensors\": {}}, \"parallel\": {}}";
  d = invalid_text(text, "missing-key");
  EXPECT_EQ(d.pointer, "/logical/inputs");
  EXPECT_EQ(d.line, 3);
  EXPECT_EQ(d.column, 4);
}

TEST(PlanParser, DiagnosticToString) {
  Diagnostic d{"shape", "plan.json", "/parallel/ops/3", 12, 7, "matmul: bad"};
  EXPECT_EQ(d.to_string(), "plan.json:12:7: /parallel/ops/3: [shape] matmul: bad");
  d.line = 0;
  d.pointer = "";
  EXPECT_EQ(d.to_string(), "plan.json: (root): [shape] matmul: bad");
}

// ---- the JSON reader on its own ----

TEST(PlanParserJson, PositionsAndNumberText) {
  std::string text = "{\"a\": [1, 0.10, -2e5],\n \"b\": {\"c\": \"x\\\"y\", \"d\": null}}";
  jsonsrc::ParseResult r = jsonsrc::parse(text);
  ASSERT_TRUE(r.value) << r.error->message;
  const jsonsrc::Value& root = *r.value;
  ASSERT_EQ(root.keys.size(), 2u);
  EXPECT_EQ(root.keys[0].name, "a");
  EXPECT_EQ(root.keys[1].name, "b");
  EXPECT_EQ(root.items[0].items[1].text, "0.10");
  EXPECT_EQ(root.items[0].items[2].text, "-2e5");
  EXPECT_EQ(root.items[0].items[2].pos.column, 17);
  EXPECT_EQ(root.keys[1].pos.line, 2);
  EXPECT_EQ(root.keys[1].pos.column, 2);
  const jsonsrc::Value& b = root.items[1];
  EXPECT_EQ(b.items[0].text, "x\"y");
  EXPECT_EQ(b.items[1].pos.line, 2);
  EXPECT_EQ(b.items[1].pos.column, 26);
  EXPECT_EQ(jsonsrc::serialize(root), "{\"a\":[1,0.10,-2e5],\"b\":{\"c\":\"x\\\"y\",\"d\":null}}");
  EXPECT_EQ(jsonsrc::pointer_token("a/b~c"), "a~1b~0c");
}

}  // namespace
}  // namespace shardproof
