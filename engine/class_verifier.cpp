#include "engine/class_verifier.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>

#include "engine/compact_expand.h"
#include "engine/compact_explore.h"
#include "engine/compact_rules.h"

namespace shardproof {
namespace {

using namespace compact;
using Clock = std::chrono::steady_clock;

// Beyond this many corner anchors the plan's classes are too fine to be
// worth it (a condition per coordinate): the answer is unknown.
constexpr size_t kMaxAnchors = 200'000;
// Splits of boxes whose corners disagree, before giving up.
constexpr int kMaxRounds = 8;

struct Range {
  int64_t lo, hi;
};

// The classes of one axis: the sorted breakpoints, each a class of its own,
// and the runs between them.
struct AxisClasses {
  int axis;
  int64_t size;
  std::set<int64_t> breaks;

  std::vector<Range> classes() const {
    std::vector<Range> out;
    int64_t prev = -1;
    for (int64_t b : breaks) {
      if (b > prev + 1) out.push_back({prev + 1, b - 1});
      out.push_back({b, b});
      prev = b;
    }
    return out;
  }
  void add(int64_t x) {
    if (x >= 0 && x < size) breaks.insert(x);
  }
};

// Every single-axis comparison in the plan puts breakpoints around its root.
void add_condition_breaks(const Condition& cond, std::vector<AxisClasses>& axes) {
  for (const Comparison& k : cond.all)
    for (AxisClasses& a : axes) {
      if (k.diff.mask() != (1u << a.axis)) continue;
      const int64_t coef = k.diff.coef[a.axis];
      const int64_t root = -k.diff.constant / coef;  // rounded toward zero
      for (int64_t d = -1; d <= 1; ++d) a.add(root + d);
    }
}

std::vector<AxisClasses> initial_classes(const CompactGraph& g) {
  std::vector<AxisClasses> axes;
  for (int axis : g.mesh.axes) axes.push_back({axis, g.mesh.size(axis), {}});
  if (g.mesh.mb > 1) axes.push_back({kMbAxis, g.mesh.mb, {}});
  for (AxisClasses& a : axes) {
    a.add(0);
    a.add(a.size - 1);
  }
  // A piece of a line is reduced to at most 2 elements. Where a slice moves
  // by one element per coordinate, the piece before it is 0, 1 or more
  // elements long at the first coordinates: those reduce differently from
  // the rest, so they are classes of their own (likewise at the end).
  auto unit_steps = [&](const Affine& e) {
    for (AxisClasses& a : axes)
      if (e.coef[a.axis] == 1 || e.coef[a.axis] == -1) {
        a.add(1);
        a.add(a.size - 2);
      }
  };
  for (const Program& p : g.programs)
    for (const TensorTemplate& t : p.tensors)
      if (t.of)
        for (const auto& [lo, hi] : t.of->slice) {
          unit_steps(lo);
          unit_steps(hi);
        }
  for (const Program& p : g.programs) {
    add_condition_breaks(p.on, axes);
    for (const TensorTemplate& t : p.tensors) add_condition_breaks(t.when, axes);
    for (const OpTemplate& o : p.ops) add_condition_breaks(o.when, axes);
  }
  return axes;
}

// Calls f(coordinate) for every point of the product of per-axis lists.
template <class F>
void each_point(const std::vector<AxisClasses>& axes,
                const std::vector<std::vector<int64_t>>& lists, F f) {
  Coord c{};
  std::vector<size_t> at(lists.size(), 0);
  for (;;) {
    for (size_t i = 0; i < lists.size(); ++i) c[axes[i].axis] = lists[i][at[i]];
    f(c);
    size_t i = 0;
    while (i < lists.size() && ++at[i] == lists[i].size()) at[i++] = 0;
    if (i == lists.size()) return;
  }
}

std::string class_text(const std::vector<AxisClasses>& axes, const std::vector<Range>& box) {
  std::string s;
  for (size_t i = 0; i < axes.size(); ++i) {
    s += (s.empty() ? "" : " ") + std::string(kAxisNames[axes[i].axis]) + "=";
    s += box[i].lo == box[i].hi ? std::to_string(box[i].lo)
                                : std::to_string(box[i].lo) + ".." + std::to_string(box[i].hi);
  }
  return s;
}

class ClassRun {
 public:
  ClassRun(const Plan& plan, const VerifyOptions& options)
      : plan_(plan),
        g_(plan.compact->graph),
        options_(options),
        explorer_(g_),
        selection_(g_),
        checked_(g_),
        axes_(initial_classes(g_)) {}

  Report run() {
    for (int round = 0; round < kMaxRounds; ++round) {
      if (std::optional<Report> r = explore_grid()) return *r;
      std::vector<std::vector<Range>> split = disagreeing_boxes([&](const Coord& c) {
        const AnchorRecord& r = records_.at(explorer_.pack(c));
        return std::to_string(r.decisions) + ":" + std::to_string(r.decision_count);
      });
      if (!split.empty()) {
        refine(split);
        continue;
      }
      Report sub = verify_selection();
      if (std::getenv("SHARDPROOF_DEBUG_CLASSES")) {
        size_t tensors = 0;
        for (const auto& p : selection_.tensors)
          for (const auto& e : p) tensors += e.size();
        std::fprintf(stderr,
                     "round %d: %zu anchors, %zu ops, %zu tensors, %zu stages, explore %.2f s\n",
                     round, records_.size(), selection_.op_count(), tensors, record_.units.size(),
                     explore_seconds_);
        std::set<std::string> verdicts(record_.verdict_keys.begin(), record_.verdict_keys.end());
        std::fprintf(stderr, "  %zu distinct verdict keys\n", verdicts.size());
        std::map<std::string, int> titles;
        for (const StageUnit& u : record_.units) titles[sub_.logical.tensors[u.logical].name]++;
        for (const auto& [t, n] : titles) std::fprintf(stderr, "  %s %d\n", t.c_str(), n);
      }
      if (sub.verdict == Verdict::Invalid || sub.verdict == Verdict::InternalError) return sub;
      split = disagreeing_boxes([&](const Coord& c) { return stage_keys(c); });
      if (!split.empty()) {
        refine(split);
        continue;
      }
      localise(sub);
      sub.stats.class_anchors = static_cast<int64_t>(records_.size());
      sub.stats.parallel_ops = op_instance_count(g_);
      sub.stats.phases.cut += explore_seconds_;
      return sub;
    }
    return unknown("the coordinate classes did not settle after " + std::to_string(kMaxRounds) +
                   " splits: instances inside a class still differ from its corners");
  }

 private:
  Report unknown(const std::string& why) const {
    Report r;
    r.plan_path = plan_.path;
    r.plan_name = plan_.name;
    r.verdict = Verdict::Unknown;
    Finding f;
    f.kind = "unknown";
    f.message =
        "the plan is too large to expand and the class verifier could not decide it: " + why;
    r.findings.push_back(std::move(f));
    return r;
  }

  std::vector<std::vector<int64_t>> grid() const {
    std::vector<std::vector<int64_t>> lists;
    for (const AxisClasses& a : axes_) {
      std::set<int64_t> pts;
      for (const Range& r : a.classes()) pts.insert({r.lo, r.hi});
      lists.emplace_back(pts.begin(), pts.end());
    }
    return lists;
  }

  // Explores every corner not explored yet; a report if it cannot go on.
  std::optional<Report> explore_grid() {
    auto start = Clock::now();
    std::vector<std::vector<int64_t>> lists = grid();
    size_t count = 1;
    for (const auto& l : lists) count *= l.size();
    if (count > kMaxAnchors)
      return unknown(std::to_string(count) + " corner coordinates to explore (limit " +
                     std::to_string(kMaxAnchors) +
                     "): the plan's conditions cut the mesh too finely");
    try {
      int64_t done = 0;
      each_point(axes_, lists, [&](const Coord& c) {
        const int64_t key = explorer_.pack(c);
        if (!records_.count(key)) records_.emplace(key, explorer_.explore(c, selection_, checked_));
        if (options_.progress && (++done % 16 == 0 || done == static_cast<int64_t>(count))) {
          VerifyProgress p;
          p.done = done;
          p.total = static_cast<int64_t>(count);
          p.stage = "class corners";
          p.status = "exploring";
          options_.progress(p);
        }
      });
    } catch (const ExploreError& e) {
      return unknown(e.message);
    }
    explore_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
    return std::nullopt;
  }

  // The boxes whose corners do not all give the same `signature`.
  template <class Signature>
  std::vector<std::vector<Range>> disagreeing_boxes(Signature signature) const {
    std::vector<std::vector<Range>> out;
    std::vector<std::vector<Range>> classes;
    for (const AxisClasses& a : axes_) classes.push_back(a.classes());
    std::vector<size_t> at(classes.size(), 0);
    for (;;) {
      std::vector<Range> box;
      std::vector<std::vector<int64_t>> corners;
      for (size_t i = 0; i < classes.size(); ++i) {
        box.push_back(classes[i][at[i]]);
        corners.push_back(box.back().lo == box.back().hi
                              ? std::vector<int64_t>{box.back().lo}
                              : std::vector<int64_t>{box.back().lo, box.back().hi});
      }
      std::optional<std::string> first;
      bool agree = true;
      each_point(axes_, corners, [&](const Coord& c) {
        std::string s = signature(c);
        if (!first) first = s;
        agree &= *first == s;
      });
      if (!agree) out.push_back(box);
      size_t i = 0;
      while (i < classes.size() && ++at[i] == classes[i].size()) at[i++] = 0;
      if (i == classes.size()) break;
    }
    return out;
  }

  // Splits each run of a disagreeing box in two.
  void refine(const std::vector<std::vector<Range>>& boxes) {
    if (std::getenv("SHARDPROOF_DEBUG_CLASSES"))
      for (size_t i = 0; i < boxes.size() && i < 5; ++i)
        std::fprintf(stderr, "split %s\n", class_text(axes_, boxes[i]).c_str());
    for (const std::vector<Range>& box : boxes)
      for (size_t i = 0; i < box.size(); ++i)
        if (box[i].hi > box[i].lo) axes_[i].add(box[i].lo + (box[i].hi - box[i].lo) / 2);
  }

  // Writes and verifies what the explorations selected.
  Report verify_selection() {
    try {
      check_selected(plan_, expand_selected(g_, checked_));
      expansion_ = expand_selected(g_, selection_);
      sub_ = read_selected(plan_, expansion_);
    } catch (const plan_detail::InvalidPlan& e) {
      Report r;
      r.plan_path = plan_.path;
      r.plan_name = plan_.name;
      r.verdict = Verdict::Invalid;
      r.invalid = e.diag;
      return r;
    }
    record_ = StageRecord{};
    Report r = verify_plan(sub_, options_, record_);
    unit_of_.assign(sub_.parallel.tensors.size(), -1);
    for (size_t u = 0; u < record_.units.size(); ++u)
      for (int t : record_.units[u].members) unit_of_[t] = static_cast<int>(u);
    return r;
  }

  // The verdict keys of the stages of `c`'s claims, in order.
  std::string stage_keys(const Coord& c) const {
    std::string s;
    for (const SeedClaim& seed : records_.at(explorer_.pack(c)).seeds) {
      const TensorTemplate& t = g_.programs[seed.program].tensors[seed.element];
      const int index = sub_.parallel.find(t.name.eval(seed.c));
      const int unit = index < 0 ? -1 : unit_of_[index];
      // A claim with no stage, or a stage with no key, matches nothing.
      if (unit < 0 || record_.verdict_keys.size() <= static_cast<size_t>(unit) ||
          record_.verdict_keys[unit].empty())
        return "?" + std::to_string(explorer_.pack(c));
      s += record_.verdict_keys[unit];
      s += ';';
    }
    return s;
  }

  // Says at which mesh coordinates (and in which class) each finding shows.
  void localise(Report& r) const {
    for (Finding& f : r.findings) {
      for (const std::string& name : f.parallel_tensors) {
        const int index = sub_.parallel.find(name);
        if (index < 0) continue;
        const Origin& o = expansion_.tensors[index];
        Coord c{};
        for (int a = 0; a < kAxisCount; ++a) c[a] = o.c[a];
        std::vector<Range> box;
        for (const AxisClasses& a : axes_)
          for (const Range& k : a.classes())
            if (c[a.axis] >= k.lo && c[a.axis] <= k.hi) box.push_back(k);
        f.message += " [at mesh coordinates " + g_.mesh.describe(c, true) +
                     "; the same holds at every coordinate of its class " + class_text(axes_, box) +
                     "]";
        break;
      }
    }
  }

  const Plan& plan_;
  const CompactGraph& g_;
  const VerifyOptions& options_;
  Explorer explorer_;
  Selection selection_;
  Selection checked_;  // every op at every corner, for the ops' own rules
  std::vector<AxisClasses> axes_;
  std::unordered_map<int64_t, AnchorRecord> records_;
  Expansion expansion_;
  Plan sub_;
  StageRecord record_;
  std::vector<int> unit_of_;
  double explore_seconds_ = 0;
};

}  // namespace

Report verify_by_classes(const Plan& plan, const VerifyOptions& options) {
  auto start = Clock::now();
  Report report;
  try {
    if (std::optional<Report> broken = check_compact_rules(plan)) {
      report = std::move(*broken);
    } else {
      report = ClassRun(plan, options).run();
    }
  } catch (const std::exception& e) {
    report = Report{};
    report.verdict = Verdict::InternalError;
    report.error = e.what();
  }
  report.plan_path = plan.path;
  report.plan_name = plan.name;
  report.stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace shardproof
