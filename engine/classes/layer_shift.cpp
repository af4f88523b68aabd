#include "engine/classes/layer_shift.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "engine/classes/compact_explore_impl.h"

namespace shardproof::compact {
namespace {

bool digit(char ch) {
  return ch >= '0' && ch <= '9';
}

bool same_attrs(const AttrMap& a, const AttrMap& b) {
  if (a.size() != b.size()) return false;
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j)
    if (i->first != j->first || i->second.describe() != j->second.describe()) return false;
  return true;
}

// Pairs the tensors of a corner's logical cone with those of the shifted
// cone: one to one, each pair alike in everything a stage reads of a
// tensor (shape, dtype, being a logical input, output, or computed).
class ConeMatch {
 public:
  explicit ConeMatch(const Graph& g) : g_(g), input_(g.tensors.size()), output_(g.tensors.size()) {
    for (int t : g.inputs) input_[t] = 1;
    for (int t : g.outputs) output_[t] = 1;
  }
  bool pair(int a, int b) {
    auto [it, fresh] = to_.try_emplace(a, b);
    if (!fresh) return it->second == b;
    if (!from_.emplace(b, a).second) return false;
    const TensorDecl &x = g_.tensors[a], &y = g_.tensors[b];
    return x.shape == y.shape && x.dtype == y.dtype && input_[a] == input_[b] &&
           output_[a] == output_[b] && (g_.producer[a] < 0) == (g_.producer[b] < 0);
  }
  std::optional<int> image(int a) const {
    auto it = to_.find(a);
    return it == to_.end() ? std::nullopt : std::optional<int>(it->second);
  }
  const std::unordered_map<int, int>& pairs() const { return to_; }

 private:
  const Graph& g_;
  std::vector<char> input_, output_;
  std::unordered_map<int, int> to_, from_;
};

}  // namespace

std::optional<std::string> shifted_name(const std::string& name,
                                        const std::vector<int64_t>& shift) {
  std::string out;
  size_t run = 0;
  for (size_t i = 0; i < name.size();) {
    if (!digit(name[i])) {
      out += name[i++];
      continue;
    }
    size_t j = i;
    while (j < name.size() && digit(name[j])) ++j;
    if (run >= shift.size() || j - i > 15) return std::nullopt;
    const std::string text = name.substr(i, j - i);
    const int64_t v = std::stoll(text);
    if (std::to_string(v) != text) return std::nullopt;  // leading zeros
    const int64_t moved = v + shift[run++];
    if (moved < 0) return std::nullopt;
    out += std::to_string(moved);
    i = j;
  }
  if (run != shift.size()) return std::nullopt;
  return out;
}

std::optional<std::string> check_layer_shift(const CompactGraph& g, const Plan& sub,
                                             const Expansion& expansion,
                                             const std::vector<StageUnit>& units, int64_t span) {
  const Graph& lg = sub.logical;
  // Each claimed logical tensor's numbers move by k * d at p = lo + d, k
  // being its claim templates' pp-coefficients (which must agree).
  std::vector<std::optional<std::vector<int64_t>>> rate(lg.tensors.size());
  std::vector<char> mixed(lg.tensors.size(), 0);
  std::unordered_map<const Template*, Pattern> patterns;
  bool moves = false;
  for (size_t i = 0; i < sub.parallel.tensors.size(); ++i) {
    const TensorDecl& t = sub.parallel.tensors[i];
    if (!t.of || t.of->logical < 0) continue;
    const Origin& o = expansion.tensors[i];
    const TensorTemplate& tt = g.programs[o.program].tensors[o.element];
    if (!tt.of) return "internal: a claim without its template's lineage";
    auto it = patterns.find(&tt.of->tensor);
    if (it == patterns.end())
      it = patterns.emplace(&tt.of->tensor, pattern_of(tt.of->tensor)).first;
    std::vector<int64_t> k;
    bool plain = true;  // every number written as its digits (a negative one is "-" and digits)
    Coord c{};
    for (int a = 0; a < kAxisCount; ++a) c[a] = o.c[a];
    for (const Affine& slot : it->second.slots) {
      k.push_back(slot.coef[kPpAxis]);
      moves |= k.back() != 0;
      plain &= slot.eval(c) >= 0;
    }
    std::optional<std::vector<int64_t>>& r = rate[t.of->logical];
    if (!plain)
      mixed[t.of->logical] = 1;
    else if (!r)
      r = std::move(k);
    else if (*r != k)
      mixed[t.of->logical] = 1;
  }
  if (!moves) return std::nullopt;

  auto name_of = [&](int t) { return "\"" + lg.tensors[t].name + "\""; };
  // The tensor a claim of `t` at lo names at lo + d.
  auto shifted = [&](int t, int64_t d) -> std::optional<int> {
    if (!rate[t] || mixed[t]) return std::nullopt;
    std::vector<int64_t> by = *rate[t];
    for (int64_t& k : by) k *= d;
    std::optional<std::string> name = shifted_name(lg.tensors[t].name, by);
    if (!name) return std::nullopt;
    const int found = lg.find(*name);
    return found < 0 ? std::nullopt : std::optional<int>(found);
  };

  std::unordered_set<std::string> seen;
  for (const StageUnit& u : units) {
    if (u.logical < 0) continue;
    std::string key = std::to_string(u.logical) + ":";
    for (int o : u.logical_cone) key += std::to_string(o) + ",";
    key += "|";
    for (int o : u.restricted) key += std::to_string(o) + ",";
    if (!seen.insert(key).second) continue;
    std::vector<int> ops(u.logical_cone.rbegin(), u.logical_cone.rend());  // consumers first
    ops.insert(ops.end(), u.restricted.begin(), u.restricted.end());
    // Tensors the cone computes, and the operands of restricted ops (a
    // restricted claim's boundary: the stage takes them as free).
    std::unordered_set<int> computed, operands;
    for (int o : u.logical_cone)
      for (int t : lg.ops[o].out) computed.insert(t);
    for (int o : u.restricted)
      for (int t : lg.ops[o].in) operands.insert(t);
    for (int64_t d = 1; d <= span; ++d) {
      const std::string where = " (the stage of " + name_of(u.logical) + ", " + std::to_string(d) +
                                " pipeline stage" + (d > 1 ? "s" : "") + " further)";
      ConeMatch m(lg);
      const std::optional<int> target = shifted(u.logical, d);
      if (!target || !m.pair(u.logical, *target))
        return "the claimed tensor " + name_of(u.logical) + " has no twin" + where;
      // Each op meets its twin through an output already paired (the
      // target's, or one a paired op reads), else through its output's
      // claim (a restricted input's producer); consumers first.
      std::vector<int> pending = ops;
      while (!pending.empty()) {
        std::optional<std::pair<size_t, int>> next;  // (pending index, twin)
        for (size_t i = 0; i < pending.size() && !next; ++i)
          for (int t : lg.ops[pending[i]].out)
            if (std::optional<int> image = m.image(t)) {
              next = std::make_pair(i, lg.producer[*image]);
              break;
            }
        for (size_t i = 0; i < pending.size() && !next; ++i)
          for (int t : lg.ops[pending[i]].out)
            if (std::optional<int> image = shifted(t, d); image && m.pair(t, *image)) {
              next = std::make_pair(i, lg.producer[*image]);
              break;
            }
        if (!next)
          return "op \"" + lg.ops[pending.front()].display_name() + "\" has no twin" + where;
        const Op& op = lg.ops[pending[next->first]];
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(next->first));
        if (next->second < 0) return "op \"" + op.display_name() + "\" has no twin" + where;
        const Op& tw = lg.ops[next->second];
        if (tw.op != op.op || tw.in.size() != op.in.size() || tw.out.size() != op.out.size() ||
            !same_attrs(op.attrs, tw.attrs))
          return "op \"" + op.display_name() + "\" differs from its twin \"" + tw.display_name() +
                 "\"" + where;
        for (size_t i = 0; i < op.out.size(); ++i)
          if (!m.pair(op.out[i], tw.out[i]))
            return "op \"" + op.display_name() + "\" writes other tensors than its twin \"" +
                   tw.display_name() + "\"" + where;
        for (size_t i = 0; i < op.in.size(); ++i)
          if (!m.pair(op.in[i], tw.in[i]))
            return "op \"" + op.display_name() + "\" reads other tensors than its twin \"" +
                   tw.display_name() + "\"" + where;
      }
      // The cone's boundary: a claimed tensor must meet the shifted claim;
      // an unclaimed one is a logical input or a restricted op's operand
      // (paired through the op, itself met through its output's claim).
      for (const auto& [a, b] : m.pairs()) {
        if (computed.count(a)) continue;
        if (rate[a] || mixed[a]) {  // claimed
          const std::optional<int> claim = shifted(a, d);
          if (claim != std::optional<int>(b))
            return "the cone reaches " + name_of(a) + " where its shifted claim names " +
                   (claim ? name_of(*claim) : std::string("no tensor")) + " and the cone " +
                   name_of(b) + where;
        } else if (lg.producer[a] >= 0 && !operands.count(a)) {
          return "the cone stops at " + name_of(a) + ", which no claim names" + where;
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace shardproof::compact
