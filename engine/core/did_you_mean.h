// "Did you mean ...?" for a misspelt name (a command, a flag, a plan key, an
// operator): the closest candidate by edit distance, counting a swap of two
// neighbours as one edit ("jsno" -> "json"), when it is close enough to be a
// typo rather than another word.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardproof {

// Optimal string alignment distance: insertions, deletions, substitutions and
// adjacent transpositions, each one edit.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// The candidate closest to `word`, if at most a third of its letters (and at
// least one) differ; ties go to the first candidate. nullopt for an exact
// match too: that is not a typo.
template <typename Range>
std::optional<std::string> closest_name(std::string_view word, const Range& candidates) {
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    std::string_view name(c);
    size_t d = edit_distance(word, name);
    if (d == 0) return std::nullopt;
    if (d < best_distance) {
      best_distance = d;
      best = std::string(name);
    }
  }
  return best;
}

// "; did you mean \"x\"?" or "" (for appending to an error message).
template <typename Range>
std::string did_you_mean(std::string_view word, const Range& candidates) {
  std::optional<std::string> c = closest_name(word, candidates);
  return c ? "; did you mean \"" + *c + "\"?" : std::string();
}

}  // namespace shardproof
