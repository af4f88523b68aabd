// The top-level member scan behind has_graph_references: exact on
// well-formed JSON (checked against the JSON parser on random documents at
// every alignment of its 64-byte blocks), escaped member names decoded, and
// has_graph_references still the parser's answer on malformed text.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/format/plan_text.h"
#include "engine/format/top_level_scan.h"

namespace shardproof {
namespace {

using nlohmann::json;

bool scan(const std::string& text) {
  return has_top_level_string(text, {"logical", "parallel"});
}

// What the parser says: an object with a string "logical" or "parallel".
bool parsed_answer(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return false;
  for (const char* key : {"logical", "parallel"})
    if (j.contains(key) && j[key].is_string()) return true;
  return false;
}

TEST(TopLevelScan, ReferencesAreFoundOnlyAtTheTopLevel) {
  EXPECT_TRUE(scan(R"({"parallel": "g.json"})"));
  EXPECT_TRUE(scan(R"({"format": 1, "logical" :"g.json"})"));
  EXPECT_TRUE(scan("\xEF\xBB\xBF{\"logical\": \"g.json\"}")) << "after a byte order mark";
  EXPECT_FALSE(scan(R"({"logical": {}, "parallel": {"x": "y"}})"));
  EXPECT_FALSE(scan(R"({"x": {"logical": "g.json"}, "y": [{"parallel": "g"}]})")) << "nested";
  EXPECT_FALSE(scan(R"([{"logical": "g.json"}])")) << "not an object";
  EXPECT_FALSE(scan(R"("logical")"));
  EXPECT_FALSE(scan(R"({"a": 1} {"logical": "g.json"})")) << "after the top-level value";
  EXPECT_FALSE(scan(R"({"name": "logical", "x": "parallel"})")) << "values are not names";
  EXPECT_FALSE(scan(R"({"logical2": "g", "xlogical": "g"})"));
  EXPECT_TRUE(scan(R"({"a": "}}\"{", "b": "\\", "logical": "g"})")) << "brackets in strings";
  EXPECT_FALSE(scan(""));
  EXPECT_FALSE(scan("garbage"));
}

TEST(TopLevelScan, EscapedNamesAreDecoded) {
  EXPECT_TRUE(scan(R"({"\u006cogical": "g.json"})"));
  EXPECT_TRUE(scan(R"({"par\u0061llel": "g.json"})"));
  EXPECT_TRUE(scan(R"({"\u006C\u006F\u0067\u0069\u0063\u0061\u006C": "g"})"));
  EXPECT_FALSE(scan(R"({"\u006cogical": {"ops": []}})"));
  EXPECT_FALSE(scan(R"({"lo\"gical": "g"})"));
  EXPECT_FALSE(scan(R"({"logical\u0000": "g"})"));
  EXPECT_FALSE(scan(R"({"\q": "g"})")) << "an invalid escape names nothing";
  EXPECT_TRUE(has_graph_references(R"({"\u006cogical": "g.json"})"));
}

TEST(TopLevelScan, MalformedTextGetsTheParsersAnswer) {
  // The scan may say yes to these; has_graph_references asks the parser.
  EXPECT_FALSE(has_graph_references(R"({"a": tru, "logical": "g"})"));
  EXPECT_FALSE(has_graph_references("{\"logical\": \"a\nb\"}")) << "a raw newline in a string";
  EXPECT_FALSE(has_graph_references(R"({"logical" "g"})"));
  EXPECT_TRUE(has_graph_references(R"({"logical": "g", oops)")) << "found before the error";
  EXPECT_FALSE(has_graph_references(R"({"logical": {}, "parallel": {"x": "y"}})"));
}

TEST(TopLevelScan, LargePlanWithoutReferences) {
  // The shape of a generated plan: two large graphs, the reference test's
  // keys nested inside them, strings with brackets and escapes.
  json graph = {{"ops", json::array()}};
  for (int i = 0; i < 3000; ++i)
    graph["ops"].push_back({{"name", "l" + std::to_string(i) + ".mlp[\"up\"]{0}"},
                            {"op", "silu"},
                            {"logical", "g.json"},
                            {"inputs", {{{"shape", {4096, 4096}}}, "x\\"}}});
  json plan = {{"format", "shardproof-plan/1"}, {"logical", graph}, {"parallel", graph}};
  for (int indent : {-1, 1}) {
    std::string text = plan.dump(indent);
    EXPECT_FALSE(has_graph_references(text));
    json referenced = plan;
    referenced["parallel"] = "parallel.json";  // after the large logical graph
    EXPECT_TRUE(has_graph_references(referenced.dump(indent)));
  }
}

// A random JSON value: deep, with strings full of quotes, backslashes and
// brackets, so block boundaries fall everywhere.
json random_value(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const char* const kPieces[] = {"a",       "\"",       "\\",       "{",    "}",
                                        "[",       "]",        ":",        ",",    " ",
                                        "logical", "parallel", "\xC3\xA9", "\x01", "\\\""};
  auto random_string = [&] {
    std::string s;
    for (int n = pick(12); n > 0; --n) s += kPieces[pick(15)];
    return s;
  };
  int kind = depth > 5 ? pick(4) : pick(7);
  switch (kind) {
    case 0:
      return json(random_string());
    case 1:
      return json(pick(100000) - 50000);
    case 2:
      return json(pick(2) == 0);
    case 3:
      return json(nullptr);
    case 4:
    case 5: {
      json o = json::object();
      for (int n = pick(6); n > 0; --n) {
        std::string key = pick(4) == 0 ? (pick(2) ? "logical" : "parallel") : random_string();
        o[key] = random_value(rng, depth + 1);
      }
      return o;
    }
    default: {
      json a = json::array();
      for (int n = pick(6); n > 0; --n) a.push_back(random_value(rng, depth + 1));
      return a;
    }
  }
}

TEST(TopLevelScan, AgreesWithTheParserOnRandomDocuments) {
  std::mt19937 rng(20240611);
  int found = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    json doc = json::object();
    for (int n = static_cast<int>(rng() % 6); n >= 0; --n) {
      std::string key =
          rng() % 3 == 0 ? (rng() % 2 ? "logical" : "parallel") : "k" + std::to_string(rng() % 10);
      doc[key] = rng() % 4 == 0 ? json("g.json") : random_value(rng, 1);
    }
    std::string text = doc.dump(rng() % 2 ? -1 : 1, ' ', rng() % 2 == 0);
    if (rng() % 3 == 0) {  // spell the names with escapes, at every depth
      for (size_t p = text.find("\"logical\""); p != std::string::npos;
           p = text.find("\"logical\"", p + 1))
        text.replace(p + 1, 1, "\\u006c");
    }
    text.insert(0, rng() % 64, ' ');  // every alignment of the blocks
    bool expected = parsed_answer(text);
    found += expected;
    ASSERT_EQ(scan(text), expected) << text;
    ASSERT_EQ(has_graph_references(text), expected) << text;
  }
  EXPECT_GT(found, 300) << "the generator must produce references too";
}

}  // namespace
}  // namespace shardproof
