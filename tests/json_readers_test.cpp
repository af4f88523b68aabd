// The two JSON readers behind jsonsrc::parse (engine/json/json_source_readers.h):
// whatever the fast reader accepts, the checked reader accepts too, with the
// same tree down to every position; on anything it is unsure of, the fast
// reader gives up, so error messages come from the checked reader alone.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/json/json_source.h"
#include "engine/json/json_source_readers.h"

namespace shardproof {
namespace {

using jsonsrc::Value;
using jsonsrc::detail::parse_checked;
using jsonsrc::detail::parse_fast;

std::string pos_text(jsonsrc::Pos p) {
  return std::to_string(p.line) + ":" + std::to_string(p.column);
}

// Every field, with positions, so a difference shows where it is.
std::string dump(const Value& v) {
  std::string s = "<" + std::to_string(static_cast<int>(v.kind)) + " " + pos_text(v.pos) + " " +
                  (v.boolean ? "T" : "F") + " [" + v.text + "]";
  for (size_t i = 0; i < v.items.size(); ++i) {
    if (!v.keys.empty()) s += " key[" + v.keys[i].name + "]@" + pos_text(v.keys[i].pos);
    s += " " + dump(v.items[i]);
  }
  return s + ">";
}

// The fast reader's answer, when it has one, is the checked reader's.
void expect_agree(const std::string& text, int max_depth = jsonsrc::kMaxDepth) {
  std::shared_ptr<Value> fast = parse_fast(text, max_depth);
  if (!fast) return;
  jsonsrc::ParseResult checked = parse_checked(text, max_depth);
  ASSERT_TRUE(checked.value) << "fast reader accepted what the checked one rejects ("
                             << checked.error->message << "): " << text;
  EXPECT_EQ(dump(*fast), dump(*checked.value)) << text;
}

const std::vector<std::string> kValid = {
    "{\"a\": [1, 0.10, -2e5],\n \"b\": {\"c\": \"x\\\"y\", \"d\": null}}",
    "\xEF\xBB\xBF{\"bom\": true}",
    "[1, -0, 2.5e3, 1E+2, 0.001e-7, 1e-999, 123456789012345678901234567890]",
    "{\"esc\": \"\\n\\t\\r\\b\\f\\/\\\\\\\"\\u0041\\u00e9\\u20ac\\ud83d\\ude00\\u0000\"}",
    "{\"caf\xC3\xA9\": \"\xE2\x82\xAC \xF0\x9F\x98\x80\", \"after\": [true, false]}",
    "{\r\n\t\"crlf\" :\r\n  [ ]  ,\"e\":{}}\r\n",
    "\"a string alone\"",
    "  42  ",
    "[[[[[[[[[[]]]]]]]]]]",
    "{\"~/\": {\"a/b\": [[], {}]}}",
};

TEST(JsonReaders, FastReaderTakesOrdinaryDocuments) {
  for (const std::string& text : kValid) {
    EXPECT_TRUE(parse_fast(text, jsonsrc::kMaxDepth)) << text;
    expect_agree(text);
  }
}

TEST(JsonReaders, PositionsCountCodePointsAndSkipTheBom) {
  std::shared_ptr<Value> v = parse_fast("\xEF\xBB\xBF[\"\xC3\xA9\xE2\x82\xAC\", 7,\n 8]", 8);
  ASSERT_TRUE(v);
  EXPECT_EQ(pos_text(v->pos), "1:1");
  EXPECT_EQ(pos_text(v->items[1].pos), "1:8");
  EXPECT_EQ(pos_text(v->items[2].pos), "2:2");
}

// Each is invalid, or valid but beyond what the fast reader is sure of.
TEST(JsonReaders, FastReaderGivesUpOnAnythingUnusual) {
  std::string many_keys = "{";
  for (int i = 0; i < 40; ++i) many_keys += "\"k" + std::to_string(i) + "\": 0, ";
  many_keys += "\"k7\": 1}";
  const std::vector<std::string> cases = {
      "",
      "   ",
      "{\"a\": 1, \"a\": 2}",
      many_keys,
      "[1e400]",
      "[1e301]",  // finite, but the checked reader decides
      "[-1.5e999]",
      "[01]",
      "[1.]",
      "[.5]",
      "[+1]",
      "[1e]",
      "[1,]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "[tru]",
      "[nulll]",
      "\"\\ud83d\"",
      "\"\\ude00\"",
      "\"\\ud83d\\u0041\"",
      "\"\\x\"",
      "\"\\u12G4\"",
      "\"tab\tinside\"",
      "\"\xC0\xAF\"",          // overlong
      "\"\xED\xA0\x80\"",      // an encoded surrogate
      "\"\xF4\x90\x80\x80\"",  // past U+10FFFF
      "\"\xE2\x82\"",          // cut short
      "\"\xFF\"",
      "\xEF\xBB{}",
      "{} {}",
      std::string("1\0 junk", 7),  // nlohmann stops at NUL; we leave that to it
      "[[[]]]",                    // deeper than the limit below
      "\"open",
  };
  for (const std::string& text : cases) {
    int depth = text == "[[[]]]" ? 2 : jsonsrc::kMaxDepth;
    EXPECT_FALSE(parse_fast(text, depth)) << text;
  }
}

TEST(JsonReaders, NestingLimitMatchesTheCheckedReader) {
  for (int depth : {1, 2, 3, 4}) {
    std::string text = std::string(3, '[') + std::string(3, ']');
    EXPECT_EQ(parse_fast(text, depth) != nullptr, parse_checked(text, depth).value != nullptr)
        << depth;
  }
  std::string deep = std::string(2000, '[') + std::string(2000, ']');
  EXPECT_FALSE(parse_fast(deep, 100000));  // the checked reader's stack is on the heap
}

// Members are stored in blocks: containers larger than a block, and many
// small ones that fill blocks up, read the same either way.
TEST(JsonReaders, LargeAndManyContainers) {
  std::string text = "{\"big\": [";
  for (int i = 0; i < 10000; ++i) text += (i ? ", " : "") + std::to_string(i);
  text += "], \"small\": [";
  for (int i = 0; i < 3000; ++i)
    text += (i ? ", " : "") + std::string("{\"k\": [") + std::to_string(i) + ", \"s\"], \"j\": {}}";
  text += "], \"wide\": {";
  for (int i = 0; i < 5000; ++i)
    text += (i ? ", \"" : "\"") + std::to_string(i) + "\": " + std::to_string(i);
  text += "}}";
  std::shared_ptr<Value> v = parse_fast(text, jsonsrc::kMaxDepth);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->items[0].items.size(), 10000u);
  EXPECT_EQ(v->items[0].items[9999].text, "9999");
  EXPECT_EQ(v->items[1].items[2999].items[0].items[0].text, "2999");
  EXPECT_EQ(v->items[2].keys[4999].name, "4999");
  expect_agree(text);
}

// Random edits of valid documents: whatever the fast reader still takes, the
// checked reader takes the same way.
TEST(JsonReaders, RandomEditsNeverMakeTheReadersDisagree) {
  const std::vector<std::string> pieces = {"\\u00e9",
                                           "\\ud83d\\ude00",
                                           "\\ud83d",
                                           "\xC3\xA9",
                                           "\xE2\x82\xAC",
                                           "\xF0\x9F\x98\x80",
                                           "\xED\xA0\x80",
                                           "\xC0",
                                           "\n",
                                           "\r\n",
                                           "1e400",
                                           "-0.0e-9",
                                           "\"",
                                           "{",
                                           "]",
                                           ",",
                                           ":",
                                           "tru",
                                           "0",
                                           "\\",
                                           " "};
  std::mt19937 rng(11);
  int accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = kValid[rng() % kValid.size()];
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      size_t at = rng() % (text.size() + 1);
      if (rng() % 2)
        text.insert(at, pieces[rng() % pieces.size()]);
      else if (at < text.size())
        text.erase(at, 1 + rng() % 3);
    }
    accepted += parse_fast(text, 4) != nullptr;
    expect_agree(text, 4);
    expect_agree(text);
  }
  EXPECT_GT(accepted, 100);  // the edits leave many documents valid
}

}  // namespace
}  // namespace shardproof
