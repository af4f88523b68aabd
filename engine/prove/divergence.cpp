#include "engine/prove/divergence.h"

#include <set>
#include <unordered_set>

namespace shardproof {
namespace {

using Values = std::vector<std::optional<Tensor<Rational>>>;

// A value that tells tensors apart (0 and +-1 are in every mask and sum).
bool informative(const Rational& v) {
  return v != 0 && v != 1 && v != -1;
}

class Matcher {
 public:
  Matcher(const Stage& stage, const Values& values)
      : values_(values), memo_(stage.tensors.size(), -1) {
    std::set<Rational> scales = {Rational(1)};  // one per distinct claim scale
    for (size_t t = 0; t < stage.tensors.size(); ++t) {
      const StageTensor& st = stage.tensors[t];
      if (st.parallel && st.of && st.of->scaled()) {
        scales.insert(st.of->scale());
        scales.insert(Rational(1) / st.of->scale());
      }
      if (st.parallel || !values[t] || dclass_of(st.dtype) != DClass::Real) continue;
      for (const Rational& v : values[t]->data)
        if (informative(v)) logical_.insert(rational_to_string(v));
    }
    scales_.assign(scales.begin(), scales.end());
  }

  // Whether every informative value of parallel tensor `t` is a logical
  // value times one scale (tensors that hold none match: nothing to blame).
  // Memoised: the walk asks once per consumer.
  bool matches(int t) {
    if (memo_[t] < 0) memo_[t] = compute(t) ? 1 : 0;
    return memo_[t] == 1;
  }

 private:
  bool compute(int t) const {
    if (!values_[t]) return true;
    for (const Rational& c : scales_) {
      bool all = true;
      for (const Rational& v : values_[t]->data) {
        if (!informative(v)) continue;
        Rational x = v / c;
        x.canonicalize();
        if (!logical_.count(rational_to_string(x))) {
          all = false;
          break;
        }
      }
      if (all) return true;
    }
    return false;
  }

  const Values& values_;
  std::vector<signed char> memo_;  // per stage tensor: -1 not yet asked
  std::vector<Rational> scales_;
  std::unordered_set<std::string> logical_;
};

}  // namespace

std::optional<std::string> divergence_op(const Stage& stage, const Values& values,
                                         const std::vector<int>& claim_tensors) {
  std::vector<int> producer(stage.tensors.size(), -1);
  for (size_t o = 0; o < stage.ops.size(); ++o)
    for (int t : stage.ops[o].out) producer[static_cast<size_t>(t)] = static_cast<int>(o);
  Matcher matcher(stage, values);
  std::vector<char> visited(stage.ops.size(), 0);
  std::vector<int> work;
  // A claim tensor that matches (a wrong factor) leaves its producer first.
  for (int t : claim_tensors)
    if (producer[t] >= 0 && stage.ops[producer[t]].parallel && !matcher.matches(t))
      work.push_back(producer[t]);
  std::optional<int> first;  // the earliest op of the region whose inputs all match
  while (!work.empty()) {
    const int o = work.back();
    work.pop_back();
    if (visited[o]) continue;
    visited[o] = 1;
    bool inputs_match = true;
    for (int t : stage.ops[o].in) {
      if (dclass_of(stage.tensors[t].dtype) != DClass::Real || matcher.matches(t)) continue;
      // A stage input that does not match is a claimed part: a partial sum
      // flows from it, and an op it feeds is no place where values diverged.
      inputs_match = false;
      const int p = producer[t];
      if (p >= 0 && stage.ops[p].parallel) work.push_back(p);
    }
    if (inputs_match && (!first || o < *first)) first = o;
  }
  if (!first) return std::nullopt;
  return stage.ops[*first].display_name;
}

}  // namespace shardproof
