// The compact form's mesh of a transformer layout (transformer_mesh.h):
// which axes number the dp and tp ranks, and the expert mesh's ranks as
// mixed-radix numbers over them.
#include "planner/transformer_mesh.h"

#include <algorithm>
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

// The weight of each of `axes` in their mixed-radix number: the product of
// the sizes of the faster ones.
template <typename Size>
std::vector<int64_t> weights(const std::vector<std::string>& axes, Size size) {
  std::vector<int64_t> w(axes.size(), 1);
  for (size_t i = axes.size(); i-- > 1;) w[i - 1] = w[i] * size(axes[i]);
  return w;
}

}  // namespace

std::string CompactMesh::unsupported(const Layout& s) {
  if (!s.etp_split()) return "";
  const int splits = s.etp_splits();
  if (splits % s.ep == 0 || s.ep % splits == 0) return "";
  // Expert-dp index q = d * splits + j: its ep rank q % ep is a number over
  // axes only when the ep boundary falls on a digit of d or of j.
  return "--etp " + str(s.etp) + " below tp " + str(s.tp) + " with ep (" + str(s.ep) +
         ") neither dividing nor a multiple of tp / etp (" + str(splits) + ")";
}

CompactMesh::CompactMesh(const Layout& s) : pp_(s.pp), cp_(s.cp) {
  if (std::string why = unsupported(s); !why.empty()) throw std::invalid_argument(why);
  if (!s.etp_split()) {
    tp_ = {{"tp", s.tp}};
    etp_ = {"tp"};
    if (s.moe() && s.ep > 1 && s.ep < s.dp) {
      // Megatron's expert mesh re-factoring dp: d = dp*ep + ep.
      dp_ = {{"dp", s.dp / s.ep}, {"ep", s.ep}};
      ep_ = {"ep"};
      edp_ = {"dp"};
    } else {
      dp_ = {{"dp", s.dp}};
      if (s.ep > 1)
        ep_ = {"dp"};  // ep = dp: one ep group, no replicas
      else
        edp_ = {"dp"};
    }
    return;
  }
  // --etp below tp: t = j * etp + k, expert-dp index q = d * splits + j.
  const int splits = s.etp_splits();
  auto add = [](Digits& d, const std::string& axis, int size) {
    if (size > 1) d.push_back({axis, size});
  };
  if (splits % s.ep == 0) {
    // A: j = tp * ep + ep (ep rank), edp rank = dp * (splits / ep) + tp.
    dp_ = {{"dp", s.dp}};
    tp_ = {{"tp", splits / s.ep}};
    add(tp_, "ep", s.ep);
    edp_ = {"dp", "tp"};
    split_ = {"tp"};
    if (s.ep > 1) {
      ep_ = {"ep"};
      split_.push_back("ep");
    }
  } else {
    // B: d = dp * r + ep, ep rank = ep * splits + tp, edp rank = dp.
    const int r = s.ep / splits;
    dp_ = {{"dp", s.dp / r}, {"ep", r}};
    tp_ = {{"tp", splits}};
    ep_ = {"ep", "tp"};
    edp_ = {"dp"};
    split_ = {"tp"};
  }
  add(tp_, "etp", s.etp);
  if (s.etp > 1) etp_ = {"etp"};
}

std::vector<std::pair<std::string, int>> CompactMesh::axes() const {
  std::vector<std::pair<std::string, int>> out = {{"pp", pp_}};
  out.insert(out.end(), dp_.begin(), dp_.end());
  if (cp_ > 1) out.push_back({"cp", cp_});
  out.insert(out.end(), tp_.begin(), tp_.end());
  return out;
}

int CompactMesh::size(const std::string& axis) const {
  if (axis == "pp") return pp_;
  if (axis == "cp") return cp_;
  for (const Digits* d : {&dp_, &tp_})
    for (const auto& [name, n] : *d)
      if (name == axis) return n;
  if (axis == "mb") throw std::logic_error("transformer planner: mb is no device axis");
  return 1;  // an axis this mesh does not have: one coordinate
}

CompactMesh::Axes CompactMesh::names(const Digits& d) {
  Axes out;
  for (const auto& [name, n] : d) out.push_back(name);
  return out;
}

Ix CompactMesh::dp() const {
  Aff a;
  const Axes axes = dp_axes();
  const std::vector<int64_t> w = weights(axes, [&](const std::string& a) { return size(a); });
  for (size_t i = 0; i < axes.size(); ++i) a = a + Aff::axis(axes[i]) * w[i];
  return Ix::affine(a);
}

Ix CompactMesh::tp() const {
  Aff a;
  const Axes axes = tp_axes();
  const std::vector<int64_t> w = weights(axes, [&](const std::string& a) { return size(a); });
  for (size_t i = 0; i < axes.size(); ++i) a = a + Aff::axis(axes[i]) * w[i];
  return Ix::affine(a);
}

std::vector<std::pair<std::string, Aff>> CompactMesh::digits(const Coord& x) const {
  std::vector<std::pair<std::string, Aff>> out;
  // A rank as the builder writes it: each axis with its weight or not at
  // all (then its digit is in the constant, as in a group's first member).
  auto split = [&](const Aff& a, const Digits& d, const char* what) {
    const Axes axes = names(d);
    const std::vector<int64_t> w = weights(axes, [&](const std::string& n) { return size(n); });
    int64_t rest = a.offset();
    for (const auto& [axis, k] : a.terms())
      if (std::find(axes.begin(), axes.end(), axis) == axes.end())
        throw std::logic_error(std::string("transformer planner: ") + what + " rank " + a.text() +
                               " names axis " + axis);
    for (size_t i = 0; i < axes.size(); ++i) {
      auto it = a.terms().find(axes[i]);
      if (it != a.terms().end()) {
        if (it->second != w[i])
          throw std::logic_error(std::string("transformer planner: ") + what + " rank " + a.text() +
                                 " is not a number over its axes");
        out.push_back({axes[i], Aff::axis(axes[i])});
        continue;
      }
      const int64_t digit = rest / w[i];
      if (rest < 0 || digit >= d[i].second)
        throw std::logic_error(std::string("transformer planner: ") + what + " rank " + a.text() +
                               " is off the mesh");
      rest -= digit * w[i];
      out.push_back({axes[i], Aff(digit)});
    }
    if (rest != 0)
      throw std::logic_error(std::string("transformer planner: ") + what + " rank " + a.text() +
                             " is not a number over its axes");
  };
  split(x.d.aff(), dp_, "dp");
  if (cp_ > 1) out.push_back({"cp", x.c.aff()});
  split(x.t.aff(), tp_, "tp");
  return out;
}

Aff CompactMesh::number(const Coord& x, const Axes& digits_of) const {
  const auto d = digits(x);
  const std::vector<int64_t> w = weights(digits_of, [&](const std::string& a) { return size(a); });
  Aff out;
  for (size_t i = 0; i < digits_of.size(); ++i) {
    auto it =
        std::find_if(d.begin(), d.end(), [&](const auto& p) { return p.first == digits_of[i]; });
    if (it == d.end())
      throw std::logic_error("transformer planner: no digit " + digits_of[i] + " in a rank");
    out = out + it->second * w[i];
  }
  return out;
}

Coord CompactMesh::rebuilt(Coord x, const std::vector<std::pair<std::string, Aff>>& d) const {
  auto value = [&](const Digits& axes) {
    const Axes n = names(axes);
    const std::vector<int64_t> w = weights(n, [&](const std::string& a) { return size(a); });
    Aff a;
    for (size_t i = 0; i < n.size(); ++i)
      for (const auto& [axis, v] : d)
        if (axis == n[i]) a = a + v * w[i];
    return Ix::affine(a);
  };
  x.d = value(dp_);
  x.t = value(tp_);
  for (const auto& [axis, v] : d)
    if (axis == "cp") x.c = Ix::affine(v);
  return x;
}

Coord CompactMesh::zeroed(Coord x, const Axes& axes) const {
  auto d = digits(x);
  for (auto& [axis, v] : d)
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) v = Aff(0);
  if (std::find(axes.begin(), axes.end(), "pp") != axes.end()) x.p = 0;
  return rebuilt(x, d);
}

Coord CompactMesh::spanned(Coord x, const Axes& axes) const {
  auto d = digits(x);
  for (auto& [axis, v] : d)
    if (std::find(axes.begin(), axes.end(), axis) != axes.end()) v = Aff::axis(axis);
  return rebuilt(x, d);
}

std::set<std::string> CompactMesh::nonzero_axes(int r) const {
  std::set<std::string> out;
  int64_t rest = r;
  const auto all = axes();
  for (size_t i = all.size(); i-- > 0;) {
    if (rest % all[i].second != 0) out.insert(all[i].first);
    rest /= all[i].second;
  }
  return out;
}

std::string CompactMesh::tp0() const {
  std::string s;
  for (const auto& [axis, n] : tp_)
    if (n > 1) s = all_of({s, axis + " == 0"});
  return s;
}

std::vector<std::string> CompactMesh::tp_rest() const {
  std::vector<std::string> out;
  std::string prefix;
  for (const auto& [axis, n] : tp_) {
    if (n == 1) continue;
    out.push_back(all_of({prefix, axis + " >= 1"}));
    prefix = all_of({prefix, axis + " == 0"});
  }
  return out;
}

}  // namespace shardproof::planner::transformer
