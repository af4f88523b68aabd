#include "engine/format/top_level_scan.h"

#include <bit>
#include <cstdint>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <nlohmann/json.hpp>

namespace shardproof {
namespace {

// Where the scanner is, byte by byte. Only depth 1 (the members of the
// top-level object) is looked at closely; deeper values are only counted.
struct ScanState {
  enum class Expect { Key, Colon, Value, Comma };
  int depth = 0;
  bool in_string = false;
  bool escape = false;       // the previous byte in a string was an unpaired '\'
  bool in_key = false;       // the string is a top-level member's name
  bool key_escaped = false;  // ... and has escapes to decode
  bool wanted_key = false;   // the last top-level name is one of the keys
  Expect expect = Expect::Key;
  size_t key_start = 0;
};

enum class Step { More, Found, Done };

bool is_wanted(std::string_view quoted, bool escaped,
               std::initializer_list<std::string_view> keys) {
  std::string_view name = quoted.substr(1, quoted.size() - 2);
  if (escaped) {
    // Rare: let the JSON parser decode \uXXXX and friends exactly.
    nlohmann::json decoded = nlohmann::json::parse(quoted, nullptr, false);
    if (!decoded.is_string()) return false;
    const std::string& s = decoded.get_ref<const std::string&>();
    for (std::string_view k : keys)
      if (s == k) return true;
    return false;
  }
  for (std::string_view k : keys)
    if (name == k) return true;
  return false;
}

// Bytes [from, to) one at a time.
Step scan_bytes(std::string_view text, size_t from, size_t to, ScanState& s,
                std::initializer_list<std::string_view> keys) {
  using Expect = ScanState::Expect;
  for (size_t i = from; i < to; ++i) {
    char c = text[i];
    if (s.in_string) {
      if (s.escape) {
        s.escape = false;
      } else if (c == '\\') {
        s.escape = true;
        s.key_escaped |= s.in_key;
      } else if (c == '"') {
        s.in_string = false;
        if (s.in_key) {
          s.in_key = false;
          s.wanted_key =
              is_wanted(text.substr(s.key_start, i + 1 - s.key_start), s.key_escaped, keys);
        }
      }
      continue;
    }
    switch (c) {
      case ' ':
      case '\t':
      case '\n':
      case '\r':
        break;
      case '"':
        if (s.depth == 0) return Step::Done;  // a string, not an object
        s.in_string = true;
        if (s.depth == 1 && s.expect == Expect::Key) {
          s.in_key = true;
          s.key_escaped = false;
          s.key_start = i;
          s.expect = Expect::Colon;
        } else if (s.depth == 1 && s.expect == Expect::Value) {
          if (s.wanted_key) return Step::Found;
          s.expect = Expect::Comma;
        }
        break;
      case '{':
      case '[':
        if (s.depth == 0) {
          if (c == '[') return Step::Done;
          s.expect = Expect::Key;
        } else if (s.depth == 1) {
          s.expect = Expect::Comma;
        }
        ++s.depth;
        break;
      case '}':
      case ']':
        if (--s.depth <= 0) return Step::Done;  // the top-level object ended
        break;
      case ':':
        if (s.depth == 1 && s.expect == Expect::Colon) s.expect = Expect::Value;
        break;
      case ',':
        if (s.depth == 1) {
          s.expect = Expect::Key;
          s.wanted_key = false;
        }
        break;
      default:  // a number or literal (or garbage)
        if (s.depth == 0) return Step::Done;
        if (s.depth == 1 && s.expect == Expect::Value) s.expect = Expect::Comma;
        break;
    }
  }
  return Step::More;
}

// Inlined into each build of the scan below (popcount is an instruction in
// one of them, a libgcc call in the other).
#define SP_BLOCK_HELPER [[gnu::always_inline]] inline

// Bit i of each mask is byte i of a 64-byte block.
struct BlockMasks {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};

SP_BLOCK_HELPER BlockMasks block_masks(const char* p) {
  BlockMasks m;
#if defined(__SSE2__)
  auto eq = [](__m128i v, char c) { return _mm_cmpeq_epi8(v, _mm_set1_epi8(c)); };
  auto bits = [](__m128i v) { return static_cast<uint64_t>(_mm_movemask_epi8(v) & 0xffff); };
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    int shift = 16 * k;
    m.quote |= bits(eq(v, '"')) << shift;
    m.backslash |= bits(eq(v, '\\')) << shift;
    m.open |= bits(_mm_or_si128(eq(v, '{'), eq(v, '['))) << shift;
    m.close |= bits(_mm_or_si128(eq(v, '}'), eq(v, ']'))) << shift;
  }
#else
  for (int i = 0; i < 64; ++i) {
    uint64_t bit = uint64_t{1} << i;
    char c = p[i];
    if (c == '"') m.quote |= bit;
    if (c == '\\') m.backslash |= bit;
    if (c == '{' || c == '[') m.open |= bit;
    if (c == '}' || c == ']') m.close |= bit;
  }
#endif
  return m;
}

// Bit i of the result: the parity of bits 0..i (inside a string, counting
// its opening quote, when quotes are unescaped).
SP_BLOCK_HELPER uint64_t prefix_xor(uint64_t x) {
  for (int shift = 1; shift < 64; shift *= 2) x ^= x << shift;
  return x;
}

// Whether the depth stays at 2 or more through the block's brackets.
SP_BLOCK_HELPER bool stays_nested(int depth, uint64_t open, uint64_t close) {
  if (depth - std::popcount(close) >= 2) return true;
  for (uint64_t all = open | close; all != 0; all &= all - 1) {
    uint64_t bit = all & -all;
    depth += (open & bit) ? 1 : -1;
    if (depth < 2) return false;
  }
  return true;
}

}  // namespace

// x86-64 before 2008 has no popcnt instruction: one build for each, chosen
// when the program loads.
#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target_clones("popcnt", "default")]]
#endif
bool has_top_level_string(std::string_view text, std::initializer_list<std::string_view> keys) {
  ScanState s;
  size_t i = 0;
  // nlohmann's reader skips a UTF-8 byte order mark, and so do we.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < text.size()) {
    size_t end = std::min(text.size(), i + 64);
    // Inside a nested value, without escapes: a whole block at once.
    if (s.depth >= 2 && !s.escape && end - i == 64) {
      BlockMasks m = block_masks(text.data() + i);
      if (m.backslash == 0) {
        uint64_t inside = prefix_xor(m.quote) ^ (s.in_string ? ~uint64_t{0} : 0);
        uint64_t open = m.open & ~inside, close = m.close & ~inside;
        if (stays_nested(s.depth, open, close)) {
          s.depth += std::popcount(open) - std::popcount(close);
          s.in_string = (inside >> 63) != 0;
          i = end;
          continue;
        }
      }
    }
    Step step = scan_bytes(text, i, end, s, keys);
    if (step != Step::More) return step == Step::Found;
    i = end;
  }
  return false;
}

}  // namespace shardproof
