#include "engine/prove/stage_testing.h"

#include <algorithm>
#include <climits>
#include <set>

#include <xxhash.h>

#include "engine/prove/counterexample.h"
#include "engine/prove/divergence.h"

namespace shardproof {
namespace {

// Integers next to the stage's integer constants: the bounds a stage
// compares ids with (a vocabulary shard's lo and hi). An off-by-one bound
// shows on one id of a line of 10^5, which uniform values almost never hit.
std::vector<int64_t> values_near_constants(const Stage& stage) {
  std::set<int64_t> near;
  for (const StageOp& op : stage.ops) {
    if (op.op != "const" || op.out.empty()) continue;
    if (dclass_of(stage.tensors[static_cast<size_t>(op.out[0])].dtype) != DClass::Int) continue;
    auto value = op.attrs.find("value");
    if (value == op.attrs.end() || !value->second.is_int()) continue;
    const int64_t c = value->second.as_int();
    if (c > INT64_MIN + 1 && c < INT64_MAX - 1)
      for (int64_t d : {-1, 0, 1}) near.insert(c + d);
  }
  return {near.begin(), near.end()};
}

// The stage tensor of leaf "L<t>_<i>" or "P<t>_<i>", -1 when none.
// Where each integer leaf "L<t>_<i>" / "P<t>_<i>" stands among all the
// stage's integer leaves (free integer tensors, elements in order).
class IntLeaves {
 public:
  explicit IntLeaves(const Stage& stage) : first_(stage.tensors.size(), 0) {
    for (size_t t = 0; t < stage.tensors.size(); ++t) {
      first_[t] = count_;
      const StageTensor& st = stage.tensors[t];
      if (st.free && dclass_of(st.dtype) == DClass::Int) count_ += element_count(st.shape);
    }
  }
  int64_t count() const { return count_; }
  int64_t index(const std::string& name) const {
    const int t = leaf_owner(name);
    const size_t underscore = name.find('_');
    if (t < 0 || t >= static_cast<int>(first_.size()) || underscore == std::string::npos) return 0;
    return first_[static_cast<size_t>(t)] + std::stoll(name.substr(underscore + 1));
  }

 private:
  std::vector<int64_t> first_;
  int64_t count_ = 0;
};

uint64_t leaf_hash(const std::string& name, int trial) {
  uint64_t h = std::hash<std::string>{}(name) ^ (0x9e3779b97f4a7c15ull * (trial + 1));
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return h;
}

// Deterministic small values per leaf name and trial: reals n/d with
// |n| <= 5, d in 1..3; booleans 0 or 1; integers in `ints` (by default 0
// or 1: valid as indices of any non-empty dimension).
Rational random_value(const std::string& name, int trial, DClass cls, IntRange ints) {
  const uint64_t h = leaf_hash(name, trial);
  if (cls == DClass::Int)
    return Rational(static_cast<long>(ints.lo + static_cast<int64_t>(h % (ints.hi - ints.lo))));
  if (cls != DClass::Real) return Rational(static_cast<long>(h % 2));
  Rational r(static_cast<long>(h % 11) - 5, static_cast<long>((h >> 8) % 3) + 1);
  r.canonicalize();
  return r;
}

// From the second trial on, every integer leaf walks through the values
// next to the stage's constants that lie in its range, one per trial (each
// leaf from another start), so that every leaf meets every such value.
std::optional<Rational> value_near_constant(int64_t leaf, int trial, IntRange ints,
                                            const std::vector<int64_t>& near) {
  if (trial == 0) return std::nullopt;
  auto first = std::lower_bound(near.begin(), near.end(), ints.lo);
  auto last = std::lower_bound(near.begin(), near.end(), ints.hi);
  if (first == last) return std::nullopt;
  const int64_t k = (leaf + trial - 1) % (last - first);
  return Rational(static_cast<long>(first[k]));
}

// Trials beyond the requested ones, so that the walk above completes (a
// stage without integer constants gets none).
constexpr int kMaxNearTrials = 16;

// Exact values past this size end a trial (skipped, as one outside the
// plan's domain): deep cones of transcendental ops would otherwise make
// testing a stage take minutes. Testing only refutes, so nothing is lost
// but that trial; the solver still decides the stage.
constexpr size_t kMaxTestBits = 1 << 14;

// Fixed random functions: a small nonzero rational keyed by a hash of the
// function's name and its exact arguments. A polynomial's value grows with
// its arguments, so a deep cone (softmax after layer norm after a matmul)
// outgrew kMaxTestBits and its bug reached the solver untested; a call here
// starts small again. Nonzero, since a call may be a denominator.
class HashedFunctions : public FunctionTable {
 public:
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    std::string key = fn;
    for (const Rational& a : args) key += "|" + rational_to_string(a);
    const uint64_t h = XXH3_64bits(key.data(), key.size());
    long n = static_cast<long>(h % 100) - 50;
    if (n >= 0) ++n;
    Rational r(n, static_cast<long>((h >> 8) % 7) + 1);
    r.canonicalize();
    return r;
  }
};

}  // namespace

IntRange int_range(const Stage& stage, const std::string& name) {
  return int_range(stage.value_maps, name);
}

IntRange int_range(const std::vector<std::optional<ValueMap>>& maps, const std::string& name) {
  int t = leaf_owner(name);
  if (t < 0 || t >= static_cast<int>(maps.size()) || !maps[t]) return {};
  const ValueMap& m = *maps[t];
  if (m.reduced_hi() <= m.reduced_lo()) return {};
  return {m.reduced_lo(), m.reduced_hi()};
}

std::vector<std::string> producing_ops(const Stage& stage, const std::vector<int>& tensors) {
  std::set<int> needed(tensors.begin(), tensors.end());
  std::vector<std::string> names;
  for (auto it = stage.ops.rbegin(); it != stage.ops.rend(); ++it) {
    if (!it->parallel) continue;
    bool produces = false;
    for (int t : it->out) produces |= needed.count(t) > 0;
    if (!produces) continue;
    names.push_back(it->display_name);
    for (int t : it->in) needed.insert(t);
  }
  return names;
}

namespace {

// Arbitrary fixed functions, with the calls made recorded for the report.
class Recording : public FunctionTable {
 public:
  explicit Recording(FunctionTable& inner) : inner_(inner) {}
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    Rational value = inner_.call(fn, args);
    nlohmann::json a = nlohmann::json::array();
    for (const Rational& x : args) a.push_back(rational_to_string(x));
    if (calls_.size() < 32 && seen_.insert(fn + a.dump()).second)
      calls_.push_back({{"fn", fn}, {"args", a}, {"value", rational_to_string(value)}});
    return value;
  }
  const nlohmann::json& calls() const { return calls_; }

 private:
  FunctionTable& inner_;
  std::set<std::string> seen_;
  nlohmann::json calls_ = nlohmann::json::array();
};

}  // namespace

std::unique_ptr<FunctionTable> hashed_functions() {
  return std::make_unique<HashedFunctions>();
}

std::optional<Finding> refute_with(const Stage& stage,
                                   const std::function<Rational(const std::string&, DClass)>& leaf,
                                   FunctionTable& inner, const std::string& how, bool* in_domain) {
  Recording functions(inner);
  ConcreteAlgebra alg(functions, kMaxTestBits);
  StageValues<ConcreteAlgebra> values;
  std::vector<ClaimChecks<Rational>> claims;
  try {
    values = evaluate_stage<ConcreteAlgebra>(alg, stage, leaf);
    claims = build_claims(alg, stage, values);
  } catch (const EvalError&) {
    return std::nullopt;  // outside the plan's domain (zero denominator, bad index)
  }
  if (in_domain) *in_domain = true;
  std::optional<Finding> found;
  for (const ClaimChecks<Rational>& claim : claims) {
    if (!claim.missing.empty()) continue;
    std::vector<int64_t> differing;
    for (size_t i = 0; i < claim.checks.size(); ++i)
      if (claim.checks[i].parallel != claim.checks[i].logical)
        differing.push_back(static_cast<int64_t>(i));
    if (differing.empty()) continue;
    // The first failing claim is the finding; the others fail with it
    // (a group bug: every member of the group).
    if (found) {
      std::vector<std::string> names;
      for (int t : claim.tensors) names.push_back(stage.tensors[t].name);
      add_also_failing(*found, names);
      continue;
    }
    Finding& f = found.emplace();
    f.kind = "mismatch";
    f.stage = "stage " + std::to_string(stage.id) + ": " + stage.title;
    f.tensor = stage.tensors[stage.target].name;
    for (int t : claim.tensors) f.parallel_tensors.push_back(stage.tensors[t].name);
    f.ops = producing_ops(stage, claim.tensors);
    if (const std::optional<std::string> at = divergence_op(stage, values, claim.tensors)) {
      f.ops.erase(std::remove(f.ops.begin(), f.ops.end(), *at), f.ops.end());
      f.ops.insert(f.ops.begin(), *at);
    }
    for (size_t i = 0; i < differing.size() && i < 8; ++i)
      f.elements.push_back(full_index(stage, differing[i]));
    f.counterexample = counterexample_json(stage, values, claim, differing);
    f.counterexample["functions"] = functions.calls();
    f.message = claim.label + " differs from " + f.tensor + " at " +
                std::to_string(differing.size()) + " of " + std::to_string(claim.checks.size()) +
                " checked elements (" + how + ")";
  }
  return found;
}

std::optional<Finding> refute_by_testing(const Stage& stage, int trials, bool aim_at_constants,
                                         std::shared_ptr<const ReducedValues>* kept,
                                         bool* in_domain) {
  const std::vector<int64_t> near =
      aim_at_constants ? values_near_constants(stage) : std::vector<int64_t>{};
  const IntLeaves int_leaves(stage);
  if (trials > 0 && int_leaves.count() > 0 && !near.empty())
    trials = std::max(trials, std::min(1 + static_cast<int>(near.size()), kMaxNearTrials));
  for (int trial = 0; trial < trials; ++trial) {
    // The trial's values as a function of the leaf alone (deterministic), so
    // a failing trial's values can be kept without storing them.
    std::function<Rational(const std::string&, DClass)> leaf =
        [maps = stage.value_maps, int_leaves, trial, near](const std::string& name, DClass cls) {
          const IntRange ints = int_range(maps, name);
          if (cls == DClass::Int)
            if (std::optional<Rational> v =
                    value_near_constant(int_leaves.index(name), trial, ints, near))
              return *v;
          return random_value(name, trial, cls, ints);
        };
    HashedFunctions functions;
    std::optional<Finding> found = refute_with(
        stage, leaf, functions, "reduced sizes; found by testing random values", in_domain);
    if (!found) continue;
    if (kept) {
      auto values = std::make_shared<ReducedValues>();
      values->leaf = leaf;
      *kept = std::move(values);
    }
    return found;
  }
  return std::nullopt;
}

}  // namespace shardproof
