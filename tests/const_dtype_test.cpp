// Issue 20, family 6: a `const` without a `dtype` attribute takes the dtype
// of the tensor it defines (docs/plan-format.md). Before, `{value: 0}` into
// an f32 tensor was refused as an integer constant, and so was `{value: 1.0}`
// (the exact number 1), so a plan writer could not write a real constant
// without `dtype`. A value that does not fit the tensor's class is still a
// clear error (exit 2).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/format/plan_parser.h"
#include "engine/report/report.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::explain;
using testing::verify_json;

json tensor(json shape, const std::string& dtype) {
  return {{"shape", shape}, {"dtype", dtype}};
}
json op(const std::string& name, const std::string& kind, json in, json out, json attrs) {
  return {{"name", name}, {"op", kind}, {"in", in}, {"out", out}, {"attrs", attrs}};
}

// Logical y = x / c with `c` = const(value) of `dtype` (no dtype attribute);
// the parallel rank writes y = scale(x, factor).
json divide_by_constant(json value, const std::string& dtype, json factor) {
  json lt = {{"x", tensor({4}, "f32")}, {"c", tensor({4}, dtype)}, {"y", tensor({4}, "f32")}};
  json lops = {op("c", "const", json::array(), {"c"}, {{"value", value}, {"shape", {4}}}),
               op("y", "div", {"x", "c"}, {"y"}, json::object())};
  json pt = {{"p.x", {{"shape", {4}}, {"dtype", "f32"}, {"rank", 0}, {"of", {{"tensor", "x"}}}}},
             {"p.y", {{"shape", {4}}, {"dtype", "f32"}, {"rank", 0}, {"of", {{"tensor", "y"}}}}}};
  json pops = {op("p.y", "scale", {"p.x"}, {"p.y"}, {{"factor", factor}})};
  return {
      {"format", "shardproof-plan/1"},
      {"name", "const-dtype"},
      {"logical", {{"tensors", lt}, {"inputs", {"x"}}, {"ops", lops}, {"outputs", {"y"}}}},
      {"parallel",
       {{"world", 1}, {"tensors", pt}, {"inputs", {"p.x"}}, {"ops", pops}, {"outputs", {"p.y"}}}}};
}

ParseResult parse(const json& plan) {
  return parse_plan_text(plan.dump(1), "plan.json", "");
}

const Op& logical_const(const Plan& plan) {
  return plan.logical.ops.at(0);
}

TEST(PlanParserConstDtype, AnIntegralValueDefiningARealTensorIsAReal) {
  for (json value : {json(0), json(2), json(-3)}) {
    ParseResult r = parse(divide_by_constant(value, "f32", 1));
    ASSERT_TRUE(r.plan) << value << ": " << (r.error ? r.error->to_string() : r.io_error);
  }
}

TEST(PlanParserConstDtype, OnePointZeroIsTheExactNumberOneOfTheTensorsDtype) {
  // nlohmann writes the double 1.0 as "1.0": the literal a plan writer types.
  ASSERT_NE(divide_by_constant(1.0, "f32", 1).dump().find("\"value\":1.0"), std::string::npos);
  for (const char* dtype : {"f32", "f64", "bf16", "i64"}) {
    ParseResult r = parse(divide_by_constant(1.0, dtype, 1));
    if (std::string(dtype) == "i64") {
      // div on integers is invalid: the constant is an integer here.
      ASSERT_FALSE(r.plan) << dtype;
      EXPECT_NE(r.error->message.find("div"), std::string::npos) << r.error->to_string();
      continue;
    }
    ASSERT_TRUE(r.plan) << dtype << ": " << (r.error ? r.error->to_string() : r.io_error);
  }
}

TEST(PlanParserConstDtype, AValueThatDoesNotFitTheTensorIsAClearError) {
  struct Case {
    json value;
    const char* dtype;
    const char* says;
  };
  for (const Case& c :
       {Case{0.5, "i64", "value 1/2 is not an integer, but the tensor it defines is i64"},
        Case{json("1/3"), "i32", "is not an integer"},
        Case{2, "bool", "a bool constant must have value 0 or 1, found 2"}}) {
    json plan = divide_by_constant(1, "f32", 1);
    plan["logical"]["tensors"]["c"]["dtype"] = c.dtype;
    plan["logical"]["ops"][0]["attrs"]["value"] = c.value;
    plan["logical"]["ops"][1] = op("y", "cast", {"c"}, {"y"}, {{"dtype", "f32"}});
    ParseResult r = parse(plan);
    ASSERT_FALSE(r.plan) << c.value << " into " << c.dtype;
    EXPECT_EQ(r.error->rule, "op-infer");
    EXPECT_EQ(r.error->pointer, "/logical/ops/0");
    EXPECT_NE(r.error->message.find(c.says), std::string::npos) << r.error->to_string();
    Report report = verify_json(plan, "const-dtype-invalid");
    EXPECT_EQ(report.verdict, Verdict::Invalid) << explain(report);
    EXPECT_EQ(verdict_exit_code(report.verdict), 2);
  }
}

TEST(PlanParserConstDtype, AnExplicitDtypeStillDecides) {
  json plan = divide_by_constant(2, "f32", "1/2");
  plan["logical"]["ops"][0]["attrs"]["dtype"] = "i64";  // an integer constant into f32
  ParseResult r = parse(plan);
  ASSERT_FALSE(r.plan);
  EXPECT_EQ(r.error->rule, "op-dtype");
  plan["logical"]["ops"][0]["attrs"]["dtype"] = "f64";  // a real class: fine
  EXPECT_TRUE(parse(plan).plan);
}

TEST(PlanParserConstDtype, TheConstantIsEvaluatedAsARealOfItsTensor) {
  // x / 2 (written `2` and `2.0`) is scale(x, 1/2), never scale(x, 2).
  for (json two : {json(2), json(2.0)}) {
    Report good = verify_json(divide_by_constant(two, "f32", "1/2"), "const-dtype-good");
    EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
    Report bad = verify_json(divide_by_constant(two, "f32", 2), "const-dtype-bad");
    EXPECT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
  }
}

TEST(PlanParserConstDtype, AStageKeyDoesNotDependOnHowTheValueIsWritten) {
  ParseResult a = parse(divide_by_constant(1, "f32", 1));
  ParseResult b = parse(divide_by_constant(1.0, "f32", 1));
  ASSERT_TRUE(a.plan && b.plan);
  EXPECT_EQ(logical_const(*a.plan).attrs.at("value").describe(),
            logical_const(*b.plan).attrs.at("value").describe());
  EXPECT_EQ(logical_const(*a.plan).attrs.count("dtype"), 0u);  // nothing added to the attributes
}

}  // namespace
}  // namespace shardproof
