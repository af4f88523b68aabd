#include "engine/classes/compact_rules.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "engine/format/compact/compact_graph.h"
#include "engine/format/v1/lineage_rules.h"

namespace shardproof {
namespace {

using namespace compact;
using plan_detail::ClaimFact;
using plan_detail::CoverageHole;
using plan_detail::InvalidPlan;
using plan_detail::LineageRules;
using plan_detail::MissingPart;

// Enumerating more claim instances than this is left undecided.
constexpr int64_t kMaxRuleInstances = 50'000'000;

struct Claim {
  std::string tensor;
  SliceSpec slice;
  bool has_part = false;
  int64_t k = 0, n = 1;
};

class RuleCheck {
 public:
  explicit RuleCheck(const Plan& plan) : plan_(plan), g_(plan.compact->graph), m_(g_.mesh) {}

  // The first template whose name may repeat across its instances: the
  // holes must determine every axis the element varies along (full column
  // rank), unless an equality of its conditions pins that axis.
  std::optional<std::string> ambiguous_name() const {
    for (const Program& p : g_.programs) {
      for (const TensorTemplate& t : p.tensors)
        if (!names_every_instance(t.name, {&p.on, &t.when}, t.per_mb, {}))
          return "tensor template \"" + (*t.node.get("name"))->text + "\"";
      for (const OpTemplate& o : p.ops)
        if (o.name && !names_every_instance(*o.name, {&p.on, &o.when}, o.per_mb, o.group))
          return "op template \"" + (*o.node.get("name"))->text + "\"";
    }
    return std::nullopt;
  }

  bool names_every_instance(const Template& name, std::initializer_list<const Condition*> conds,
                            bool per_mb, const std::vector<int>& fixed) const {
    std::vector<int> axes;
    for (int a : m_.axes)
      if (m_.size(a) > 1 && std::find(fixed.begin(), fixed.end(), a) == fixed.end())
        axes.push_back(a);
    if (per_mb && m_.mb > 1) axes.push_back(kMbAxis);
    std::vector<std::vector<double>> rows;
    for (const Affine& e : name.exprs) {
      std::vector<double> row;
      for (int a : axes) row.push_back(static_cast<double>(e.coef[a]));
      rows.push_back(row);
      // A mixed-radix hole ("dp*2 + ep" with ep < 2: the expert mesh's dp
      // rank) determines each of its axes on the mesh, not only their sum.
      if (std::vector<int> digits = mixed_radix_axes(e); !digits.empty())
        for (int d : digits) {
          std::vector<double> unit;
          for (int a : axes) unit.push_back(a == d ? 1.0 : 0.0);
          rows.push_back(unit);
        }
    }
    for (const Condition* c : conds)
      for (const Comparison& k : c->all)
        if (k.op == Comparison::Op::Eq) {
          std::vector<double> row;
          for (int a : axes) row.push_back(static_cast<double>(k.diff.coef[a]));
          rows.push_back(row);
        }
    // Rank by elimination (coefficients are small integers: exact enough).
    size_t rank = 0;
    for (size_t col = 0; col < axes.size() && rank < rows.size(); ++col) {
      size_t pivot = rank;
      while (pivot < rows.size() && rows[pivot][col] == 0) ++pivot;
      if (pivot == rows.size()) continue;
      std::swap(rows[pivot], rows[rank]);
      for (size_t r = 0; r < rows.size(); ++r) {
        if (r == rank || rows[r][col] == 0) continue;
        const double f = rows[r][col] / rows[rank][col];
        for (size_t k = col; k < axes.size(); ++k) rows[r][k] -= f * rows[rank][k];
      }
      ++rank;
    }
    return rank == axes.size();
  }

  // The axes of e when e is a mixed-radix number on the mesh: ordered by
  // the magnitude of their coefficients, each one's exceeds the largest span
  // of all smaller ones, so e's value fixes every axis (two coordinates
  // with one value of e differ by 0 on each). Empty otherwise.
  std::vector<int> mixed_radix_axes(const Affine& e) const {
    std::vector<std::pair<int64_t, int>> terms;  // |coefficient|, axis
    for (int a = 0; a < kAxisCount; ++a)
      if (e.coef[a] != 0) terms.push_back({e.coef[a] < 0 ? -e.coef[a] : e.coef[a], a});
    if (terms.size() < 2) return {};
    std::sort(terms.begin(), terms.end());
    int64_t span = 0;  // the largest |sum of the smaller terms' differences|
    std::vector<int> out;
    for (const auto& [k, a] : terms) {
      if (k <= span) return {};
      // |k| <= 2^40 and sizes <= 2^20; a span past 2^62 admits no more terms.
      span = std::min<int64_t>(span + k * (m_.size(a) - 1), int64_t(1) << 62);
      out.push_back(a);
    }
    return out;
  }

  // Throws InvalidPlan; false when the enumeration would be too large.
  bool run() {
    // Templates by index, for the plan-wide rules' origins.
    std::vector<const TensorTemplate*> templates;
    LineageRules rules;
    for (const Program& p : g_.programs)
      for (const TensorTemplate& t : p.tensors) {
        if (!t.of) {
          if (t.input)
            t.node.fail("lineage-input", "parallel input template " + quoted(t) +
                                             " has no lineage (\"of\"); every parallel input must "
                                             "claim a logical input");
          if (t.output)
            t.node.fail("lineage-output",
                        "parallel output template " + quoted(t) + " has no lineage (\"of\")");
          continue;
        }
        if (!t.input && !t.output && !t.of->has_part) continue;
        const size_t origin = templates.size();
        templates.push_back(&t);
        bool ok = each_instance(p, t, [&](const Coord& c) {
          Claim claim = evaluate(t, c);
          const int logical = plan_.logical.find(claim.tensor);
          if (logical < 0) return;  // named by the stage's own checks
          if (t.input && !is_logical_input(logical))
            t.node.get("of")->fail("lineage-input",
                                   "parallel input " + quoted(t) + " at (" +
                                       m_.describe(c, t.per_mb) + ") claims \"" + claim.tensor +
                                       "\", which is not an input of the logical graph");
          rules.add(ClaimFact{claim.tensor, claim.slice, claim.has_part, claim.k, claim.n,
                              !t.of->over.empty(), t.output, origin});
        });
        if (!ok) return false;
      }
    if (std::optional<MissingPart> m = rules.first_incomplete_part_set()) {
      const std::string& tensor = std::get<0>(m->set);
      const int64_t n = std::get<2>(m->set);
      templates[m->origin]->node.get("of")->fail(
          "lineage-parts", "claims of " + tensor + " as " + std::to_string(n) +
                               " additive parts never claim part " + std::to_string(m->missing) +
                               "; a part set must be complete");
    }
    if (std::optional<CoverageHole> h = rules.first_coverage_hole(plan_.logical)) {
      const TensorDecl& out = plan_.logical.tensors[plan_.logical.outputs[h->output]];
      plan_.compact->logical_syntax.outputs->item(h->output).fail(
          "lineage-coverage", "element " + shape_to_string(h->hole) + " of logical output \"" +
                                  out.name + "\" " + shape_to_string(out.shape) +
                                  " is covered by no parallel output instance");
    }
    return true;
  }

 private:
  static std::string quoted(const TensorTemplate& t) {
    return "\"" + (*t.node.get("name"))->text + "\"";
  }

  bool is_logical_input(int logical) const {
    for (int t : plan_.logical.inputs)
      if (t == logical) return true;
    return false;
  }

  Claim evaluate(const TensorTemplate& t, const Coord& c) const {
    Claim claim;
    claim.tensor = t.of->tensor.eval(c);
    const int logical = plan_.logical.find(claim.tensor);
    if (t.of->has_slice) {
      for (const auto& [lo, hi] : t.of->slice) claim.slice.push_back({lo.eval(c), hi.eval(c)});
    } else if (logical >= 0) {
      for (int64_t d : plan_.logical.tensors[logical].shape) claim.slice.push_back({0, d});
    }
    if (t.of->has_part) {
      claim.has_part = true;
      claim.k = t.of->part_k.eval(c);
      claim.n = t.of->part_n.eval(c);
    }
    return claim;
  }

  // Calls f at one instance per distinct value of the axes the claim and
  // the conditions mention; false if that is too many.
  template <class F>
  bool each_instance(const Program& p, const TensorTemplate& t, F f) {
    // The claim's box ("over") is not read by these rules.
    AxisMask mask = p.on.mask() | t.when.mask() | t.of->tensor.mask() | t.of->part_k.mask() |
                    t.of->part_n.mask();
    for (const auto& [lo, hi] : t.of->slice) mask |= lo.mask() | hi.mask();
    // An axis an equality pins (a program's "pp == 3") takes that value only.
    Coord c{};
    for (const Condition* cond : {&p.on, &t.when})
      for (const Comparison& k : cond->all)
        for (int a = 0; a < kAxisCount; ++a)
          if (k.op == Comparison::Op::Eq && k.diff.mask() == (1u << a) &&
              k.diff.constant % k.diff.coef[a] == 0 && (mask & (1u << a))) {
            c[a] = -k.diff.constant / k.diff.coef[a];
            mask &= ~(1u << a);
          }
    std::vector<int> axes;
    int64_t count = 1;
    for (int a = 0; a < kAxisCount; ++a)
      if (mask & (1u << a)) {
        axes.push_back(a);
        count *= a == kMbAxis ? m_.mb : m_.size(a);
      }
    budget_ += count;
    if (budget_ > kMaxRuleInstances) return false;
    for (;;) {
      if (p.on.holds(c) && t.when.holds(c)) f(c);
      size_t i = 0;
      for (; i < axes.size(); ++i) {
        const int a = axes[i];
        if (++c[a] < (a == kMbAxis ? m_.mb : m_.size(a))) break;
        c[a] = 0;
      }
      if (i == axes.size()) return true;
    }
  }

  const Plan& plan_;
  const CompactGraph& g_;
  const Mesh& m_;
  int64_t budget_ = 0;
};

}  // namespace

std::optional<Report> check_compact_rules(const Plan& plan) {
  Report r;
  r.plan_path = plan.path;
  r.plan_name = plan.name;
  try {
    RuleCheck check(plan);
    if (std::optional<std::string> name = check.ambiguous_name()) {
      r.verdict = Verdict::Unknown;
      Finding f;
      f.kind = "unknown";
      f.message = "the class verifier cannot show that " + *name +
                  " gives each of its instances its own name (its holes must determine every "
                  "coordinate the template varies along)";
      r.findings.push_back(std::move(f));
      return r;
    }
    if (check.run()) return std::nullopt;
    r.verdict = Verdict::Unknown;
    Finding f;
    f.kind = "unknown";
    f.message = "checking coverage and part sets would enumerate more than " +
                std::to_string(kMaxRuleInstances) + " claim instances";
    r.findings.push_back(std::move(f));
  } catch (const InvalidPlan& e) {
    r.verdict = Verdict::Invalid;
    r.invalid = e.diag;
  }
  return r;
}

}  // namespace shardproof
