#include "engine/prove/lifted_values.h"

#include <algorithm>

#include "engine/core/tensor.h"
#include "engine/ops/algebra.h"
#include "engine/prove/stage_testing.h"
#include "engine/prove/zero_padding.h"
#include "engine/stage/stage_eval.h"

namespace shardproof {
namespace {

// "L<t>_<i>" / "P<t>_<i>": the tensor and the flat element (nullopt for
// other names, and for the negative owners of parts absent from a stage).
std::optional<std::pair<int, int64_t>> parse_leaf(const std::string& name) {
  if (name.size() < 4 || (name[0] != 'L' && name[0] != 'P')) return std::nullopt;
  const size_t underscore = name.find('_');
  if (underscore == std::string::npos || name[1] == '-') return std::nullopt;
  return std::make_pair(std::stoi(name.substr(1, underscore - 1)),
                        static_cast<int64_t>(std::stoll(name.substr(underscore + 1))));
}

enum class Fill { Repeat, Zero };

// The reduced position standing for full position q along one dim of a
// reduced tensor (`positions`: the full position of each reduced one,
// increasing; empty: not reduced). exact: q is itself a kept position.
struct Source {
  int64_t position;
  bool exact;
};
Source source_of(const std::vector<int64_t>& positions, int64_t q) {
  if (positions.empty()) return {q, true};
  auto it = std::upper_bound(positions.begin(), positions.end(), q);
  if (it == positions.begin()) return {0, false};
  const int64_t r = (it - positions.begin()) - 1;
  if (positions[r] == q) return {r, true};
  // q is past the kept elements of r's piece: the kept run ending at r
  // (consecutive full positions) repeats.
  int64_t start = r;
  while (start > 0 && positions[start - 1] == positions[start] - 1) --start;
  return {start + (q - positions[start]) % (r - start + 1), false};
}

// Functions as the refutation had them.
class LiftedFunctions : public FunctionTable {
 public:
  explicit LiftedFunctions(const ReducedValues& v) : v_(v), hashed_(hashed_functions()) {}
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    if (auto t = v_.table.find(fn); t != v_.table.end())
      if (auto e = t->second.find(args); e != t->second.end()) return e->second;
    if (auto o = v_.otherwise.find(fn); o != v_.otherwise.end()) return o->second;
    return hashed_->call(fn, args);
  }

 private:
  const ReducedValues& v_;
  std::unique_ptr<FunctionTable> hashed_;
};

// The value of a leaf of the stage replayed at full size: its full tensor
// and index, mapped to the reduced element that stands for it.
Rational lifted(const Stage& reduced, const ReducedValues& values, Fill fill, int t,
                const std::vector<int64_t>& index, const std::string& name, DClass cls) {
  const StageTensor& st = reduced.tensors[t];
  std::vector<int64_t> at(index.size());
  bool exact = true;
  for (size_t d = 0; d < index.size(); ++d) {
    const std::vector<int64_t> none;
    const std::vector<int64_t>& positions =
        reduced.full_position.empty() ? none : reduced.full_position[t][d];
    const Source s = source_of(positions, index[d]);
    at[d] = std::min<int64_t>(s.position, st.shape[d] - 1);
    exact = exact && s.exact;
  }
  if (!exact && fill == Fill::Zero && cls == DClass::Real) return Rational(0);
  int64_t flat = 0;
  for (size_t d = 0; d < at.size(); ++d) flat = flat * st.shape[d] + at[d];
  const std::string leaf = (name[0] == 'P' ? part_leaf_name(t, flat) : logical_leaf_name(t, flat));
  Rational v = values.leaf(leaf, cls);
  if (cls == DClass::Int && t < static_cast<int>(reduced.value_maps.size()) &&
      reduced.value_maps[t] && v.get_den() == 1 && v.get_num().fits_slong_p())
    v = Rational(static_cast<long>(reduced.value_maps[t]->to_full(v.get_num().get_si())));
  return v;
}

}  // namespace

LeafPlace places_in(const Stage& full) {
  return [&full](const std::string& name) -> std::optional<std::pair<int, std::vector<int64_t>>> {
    const auto leaf = parse_leaf(name);
    if (!leaf || leaf->first >= static_cast<int>(full.tensors.size())) return std::nullopt;
    return std::make_pair(leaf->first, unflatten(full.tensors[leaf->first].shape, leaf->second));
  };
}

std::optional<Finding> replay_lifted(const Stage& target, const LeafPlace& place,
                                     const Stage& reduced, const ReducedValues& values) {
  for (Fill fill : {Fill::Repeat, Fill::Zero}) {
    auto leaf = [&](const std::string& name, DClass cls) {
      const auto at = place(name);
      if (!at || at->first >= static_cast<int>(reduced.tensors.size()) ||
          at->second.size() != reduced.tensors[at->first].shape.size())
        return Rational(0);  // any value is an input the contract allows
      return lifted(reduced, values, fill, at->first, at->second, name, cls);
    };
    LiftedFunctions functions(values);
    const std::string how = fill == Fill::Repeat
                                ? "the reduced counterexample lifted to full size, each piece "
                                  "repeating its kept elements"
                                : "the reduced counterexample lifted to full size, each piece "
                                  "filled with zeros";
    if (std::optional<Finding> f = refute_with(target, leaf, functions, how)) return f;
  }
  return std::nullopt;
}

std::optional<Finding> replay_zero_padded(const Stage& full, const Stage& reduced,
                                          const ReducedValues& values, std::string& why) {
  const ZeroPadding padding = zero_padding(full, reduced);
  if (!padding.refusal.empty()) {
    why = "the zero-padded lift does not keep the reduced values: " + padding.refusal;
    return std::nullopt;
  }
  // The leaves the zero fill gives the kept positions (lifted() above): the
  // reduced values, and 0 for a part absent from the stage.
  auto leaf = [&](const std::string& name, DClass cls) {
    return parse_leaf(name) ? values.leaf(name, cls) : Rational(0);
  };
  LiftedFunctions functions(values);
  std::optional<Finding> f = refute_with(
      reduced, leaf, functions,
      "the reduced counterexample lifted to full size with zeros off its kept elements; every "
      "op of the stage keeps those zeros, so the full stage holds the reduced values there");
  if (!f) why = "the zero-padded lift shows no difference";
  return f;
}

}  // namespace shardproof
