// The plan parser on a generated plan of realistic structure (llama3-tiny,
// dp2 tp2 pp2): the IR agrees with the JSON it came from, and a diagnostic
// deep inside a large document still names the exact place. The parser works
// out JSON pointers only when it reports, so these guard that path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "engine/format/plan_parser.h"
#include "engine/json/json_source.h"
#include "planner/planner.h"

namespace shardproof {
namespace {

using nlohmann::json;

json tiny_plan() {
  planner::PlanConfig c;
  c.dp = 2;
  c.tp = 2;
  c.pp = 2;
  c.microbatches = 2;
  return planner::generate_plan("llama3-tiny", c);
}

ParseResult parse(const json& plan) {
  return parse_plan_text(plan.dump(1), "plan.json", "");
}

// Every tensor, op and edge of one graph against its JSON.
void expect_graph_matches(const Graph& g, const json& j, const std::string& key) {
  SCOPED_TRACE(key);
  ASSERT_EQ(g.tensors.size(), j["tensors"].size());
  ASSERT_EQ(g.ops.size(), j["ops"].size());
  ASSERT_EQ(g.tensor_index.size(), g.tensors.size());
  size_t t = 0;
  for (const auto& [name, decl] : j["tensors"].items()) {  // nlohmann keeps keys sorted, as dumped
    const TensorDecl& d = g.tensors[t];
    EXPECT_EQ(d.name, name);
    EXPECT_EQ(g.find(name), static_cast<int>(t));
    EXPECT_EQ(d.pointer, "/" + key + "/tensors/" + jsonsrc::pointer_token(name));
    EXPECT_EQ(d.shape, decl["shape"].get<Shape>());
    EXPECT_EQ(dtype_name(d.dtype), decl["dtype"].get<std::string>());
    EXPECT_EQ(d.rank, decl.value("rank", -1));
    EXPECT_EQ(d.of.has_value(), decl.contains("of"));
    if (d.of) {
      EXPECT_EQ(d.of->tensor, decl["of"]["tensor"].get<std::string>());
      EXPECT_EQ(d.of->has_part, decl["of"].contains("part"));
    }
    ++t;
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const Op& op = g.ops[i];
    const json& o = j["ops"][i];
    EXPECT_EQ(op.index, static_cast<int>(i));
    EXPECT_EQ(op.pointer, "/" + key + "/ops/" + std::to_string(i));
    EXPECT_EQ(op.name, o.value("name", ""));
    EXPECT_EQ(op.op, o["op"].get<std::string>());
    ASSERT_EQ(op.in.size(), o["in"].size());
    for (size_t k = 0; k < op.in.size(); ++k)
      EXPECT_EQ(g.tensors[op.in[k]].name, o["in"][k].get<std::string>());
    ASSERT_EQ(op.out.size(), o["out"].size());
    for (size_t k = 0; k < op.out.size(); ++k) {
      EXPECT_EQ(g.tensors[op.out[k]].name, o["out"][k].get<std::string>());
      EXPECT_EQ(g.producer[op.out[k]], op.index);
    }
    EXPECT_EQ(op.attrs.size(), o.value("attrs", json::object()).size());
    EXPECT_EQ(op.group.size(), o.value("group", json::array()).size());
  }
  // Producers come first in the topological order.
  ASSERT_EQ(g.topo_order.size(), g.ops.size());
  for (const Op& op : g.ops) {
    for (int t_in : op.in) {
      if (g.producer[t_in] >= 0) {
        EXPECT_LT(g.topo_rank[g.producer[t_in]], g.topo_rank[op.index]);
      }
    }
  }
}

TEST(PlanParserLarge, GeneratedPlanGivesTheIrOfItsJson) {
  json plan = tiny_plan();
  ParseResult r = parse(plan);
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  ASSERT_GT(r.plan->parallel.ops.size(), 1000u);  // large enough to matter
  expect_graph_matches(r.plan->logical, plan["logical"], "logical");
  expect_graph_matches(r.plan->parallel, plan["parallel"], "parallel");
  EXPECT_EQ(r.plan->parallel.world, plan["parallel"]["world"].get<int>());
}

// The same plan, compact or indented, reads the same; only positions differ.
TEST(PlanParserLarge, LayoutDoesNotChangeTheIr) {
  json plan = tiny_plan();
  ParseResult a = parse_plan_text(plan.dump(), "plan.json", "");
  ParseResult b = parse_plan_text(plan.dump(4), "plan.json", "");
  ASSERT_TRUE(a.plan && b.plan);
  EXPECT_EQ(a.plan->parallel.topo_order, b.plan->parallel.topo_order);
  EXPECT_EQ(a.plan->meta_json, b.plan->meta_json);
}

// Errors placed late in the document, where finding the pointer means
// walking most of it.
TEST(PlanParserLarge, DeepErrorsNameTheirPlace) {
  json plan = tiny_plan();
  size_t last = plan["parallel"]["ops"].size() - 1;
  {
    json p = plan;
    p["parallel"]["ops"][last]["out"][0] = "no.such.tensor";
    ParseResult r = parse(p);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->rule, "undeclared-tensor");
    EXPECT_EQ(r.error->pointer, "/parallel/ops/" + std::to_string(last) + "/out/0");
  }
  {
    json p = plan;
    std::string name = p["parallel"]["tensors"].items().begin().key();
    for (const auto& [k, v] : p["parallel"]["tensors"].items()) name = std::max(name, k);
    p["parallel"]["tensors"][name]["shape"][0] = -3;
    ParseResult r = parse(p);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->rule, "shape");
    EXPECT_EQ(r.error->pointer, "/parallel/tensors/" + jsonsrc::pointer_token(name) + "/shape/0");
    EXPECT_EQ(r.error->message,
              "tensor \"" + name + "\" shape[0]: expected a non-negative integer, found -3");
  }
  {
    json p = plan;
    p["parallel"]["ops"][last]["attrs"]["surprise"] = json::object();
    ParseResult r = parse(p);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->rule, "attr-value");
    EXPECT_EQ(r.error->pointer, "/parallel/ops/" + std::to_string(last) + "/attrs/surprise");
  }
}

// Keys that need escaping in a pointer, in the IR and in a diagnostic.
TEST(PlanParserLarge, PointersEscapeTensorNames) {
  json plan = tiny_plan();
  json& tensors = plan["logical"]["tensors"];
  std::string old_name = tensors.items().begin().key();
  std::string new_name = "odd/name~" + old_name;
  // Rename the first logical tensor everywhere it is named.
  std::string text = plan.dump(1);
  std::string quoted_old = "\"" + old_name + "\"";
  std::string quoted_new = "\"" + new_name + "\"";
  for (size_t at = text.find(quoted_old); at != std::string::npos;
       at = text.find(quoted_old, at + quoted_new.size()))
    text.replace(at, quoted_old.size(), quoted_new);
  ParseResult r = parse_plan_text(text, "plan.json", "");
  ASSERT_TRUE(r.plan) << (r.error ? r.error->to_string() : r.io_error);
  int t = r.plan->logical.find(new_name);
  ASSERT_GE(t, 0);
  EXPECT_EQ(r.plan->logical.tensors[t].pointer,
            "/logical/tensors/odd~1name~0" + jsonsrc::pointer_token(old_name));

  json p = json::parse(text);
  p["logical"]["tensors"][new_name]["dtype"] = "f31";
  ParseResult bad = parse(p);
  ASSERT_TRUE(bad.error);
  EXPECT_EQ(bad.error->pointer,
            "/logical/tensors/odd~1name~0" + jsonsrc::pointer_token(old_name) + "/dtype");
}

}  // namespace
}  // namespace shardproof
