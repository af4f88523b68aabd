// Plans written by hand against the shape-reduction argument after issue
// 20's families were closed (docs/soundness.md, section 3.2): each combines
// the families in a way the earlier tests did not. Every bug here was
// reported *equivalent* (or a correct plan *not equivalent*) before the
// rule it names; the truth of each was computed at full size (the solver
// on the unreduced plan, `shardproof_full_size_verdict`).
#include <gtest/gtest.h>

#include "tests/family_plans.h"
#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;
using testing::explain;
using testing::verify_json;
using namespace family_plans;

// A one-rank plan whose parallel graph copies the logical ops under "p."
// names, with `patch` applied to the copy of each named op (a bug).
json copied(const json& lt, const json& linputs, const json& lops, const json& loutputs,
            const std::map<std::string, json>& patch = {}) {
  json pt = json::object(), claims = json::object(), pops = json::array(),
       poutputs = json::array();
  std::set<std::string> inputs;
  for (const auto& i : linputs) inputs.insert(i.get<std::string>()), claims["p." + i.get<std::string>()] = i;
  for (auto& [name, t] : lt.items()) {
    if (inputs.count(name)) continue;
    json pt_t = t;
    pt_t["rank"] = 0;
    for (const auto& o : loutputs)
      if (o == name) pt_t["of"] = {{"tensor", name}};
    pt["p." + name] = pt_t;
  }
  for (json o : lops) {
    const std::string name = o["name"];
    o["name"] = "p." + name;
    for (auto& i : o["in"]) i = "p." + i.get<std::string>();
    for (auto& i : o["out"]) i = "p." + i.get<std::string>();
    if (auto it = patch.find(name); it != patch.end()) o.merge_patch(it->second);
    pops.push_back(o);
  }
  for (const auto& o : loutputs) poutputs.push_back("p." + o.get<std::string>());
  return one_rank(lt, linputs, lops, loutputs, pt, claims, pops, poutputs);
}

// ------------------------------------------- saturation of integer inputs
// An index input is assumed to hold valid positions: ids in [0, V). Their
// sum over 8 tokens reaches 16 at V = 3, over a reduced line of 2 tokens
// only 4; a clip at 5 (minimum) or 10 (maximum, relu, a comparison), or the
// floor of their mean (which divides by the full 8), is then the identity
// or a constant on every reduced input. The bug writes that reduced-size
// value; it was proven on pieces of 2 (the token line reduced: an integer
// input counted as unbounded), and each is refuted at full size.
json ids_clipped_by_minimum(int cap) {
  const int64_t T = 8, V = 3;
  json lt = {{"ids", tensor({T}, "i64")}, {"table", tensor({V, 2})}, {"e", tensor({T, 2})},
             {"se", tensor({2})},         {"f", tensor({T})},          {"s", tensor(json::array())},
             {"cap", tensor(json::array())}, {"c", tensor(json::array())}, {"y", tensor({2})}};
  json lops = {op("e", "embedding", {"ids", "table"}, {"e"}),
               op("se", "sum", {"e"}, {"se"}, {{"dims", {0}}}),
               op("f", "cast", {"ids"}, {"f"}, {{"dtype", "f32"}}),
               op("s", "sum", {"f"}, {"s"}),
               constant("cap", 5, json::array()),
               op("c", "minimum", {"s", "cap"}, {"c"}),
               op("y", "add", {"se", "c"}, {"y"})};
  return copied(lt, {"ids", "table"}, lops, {"y"},
                {{"cap", {{"attrs", {{"value", cap}}}}}});
}

TEST(ReductionAttacks, IndexIdsSummedOverTokensSaturateAtFullSizeOnly) {
  Report good = verify_json(ids_clipped_by_minimum(5), "ids-min-good");
  EXPECT_EQ(good.verdict, Verdict::Equivalent) << explain(good);
  Report bad = verify_json(ids_clipped_by_minimum(100), "ids-min-bad");
  EXPECT_EQ(bad.verdict, Verdict::NotEquivalent) << explain(bad);
}

// The same through `gather`'s index, clipped four ways; the bug replaces
// the clipped value by the constant it always is on 2 tokens.
json index_clipped(const std::string& form, bool bug) {
  const int64_t T = 8, V = 3;
  json lt = {{"x", tensor({1, V})},          {"idx", tensor({1, T}, "i64")},
             {"g", tensor({1, T})},          {"sg", tensor(json::array())},
             {"f", tensor({1, T})},          {"c", tensor(json::array())},
             {"y", tensor(json::array())}};
  json lops = {op("g", "gather", {"x", "idx"}, {"g"}, {{"dim", 1}}),
               op("sg", "sum", {"g"}, {"sg"}),
               op("f", "cast", {"idx"}, {"f"}, {{"dtype", "f32"}})};
  int reduced_value = 0;
  if (form == "mean-floor") {
    lt["m"] = tensor(json::array());
    lt["mi"] = tensor(json::array(), "i64");
    lops.push_back(op("m", "mean", {"f"}, {"m"}));
    lops.push_back(op("mi", "cast", {"m"}, {"mi"}, {{"dtype", "i64"}}));
    lops.push_back(op("c", "cast", {"mi"}, {"c"}, {{"dtype", "f32"}}));
  } else {
    lt["s"] = tensor(json::array());
    lt["cap"] = tensor(json::array());
    lops.push_back(op("s", "sum", {"f"}, {"s"}));
    lops.push_back(constant("cap", 10, json::array()));
    if (form == "maximum") {
      lops.push_back(op("c", "maximum", {"s", "cap"}, {"c"}));
      reduced_value = 10;
    } else if (form == "relu") {
      lt["d"] = tensor(json::array());
      lops.push_back(op("d", "sub", {"s", "cap"}, {"d"}));
      lops.push_back(op("c", "relu", {"d"}, {"c"}));
    } else {  // a comparison
      lt["b"] = tensor(json::array(), "bool");
      lops.push_back(op("b", "gt", {"s", "cap"}, {"b"}));
      lops.push_back(op("c", "cast", {"b"}, {"c"}, {{"dtype", "f32"}}));
    }
  }
  lops.push_back(op("y", "add", {"sg", "c"}, {"y"}));
  std::map<std::string, json> patch;
  if (bug)
    patch["c"] = {{"op", "const"},
                  {"in", json::array()},
                  {"attrs", {{"value", reduced_value}, {"shape", json::array()}}}};
  return copied(lt, {"x", "idx"}, lops, {"y"}, patch);
}

TEST(ReductionAttacks, GatherIndicesClippedMeetTheFullCount) {
  for (const char* form : {"maximum", "relu", "comparison", "mean-floor"}) {
    Report good = verify_json(index_clipped(form, false), std::string("clip-good-") + form);
    EXPECT_EQ(good.verdict, Verdict::Equivalent) << form << "\n" << explain(good);
    Report bad = verify_json(index_clipped(form, true), std::string("clip-bad-") + form);
    EXPECT_EQ(bad.verdict, Verdict::NotEquivalent) << form << "\n" << explain(bad);
  }
}

}  // namespace
}  // namespace shardproof
