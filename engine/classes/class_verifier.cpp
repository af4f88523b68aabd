#include "engine/classes/class_verifier.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>

#include "engine/classes/batch_reuse.h"
#include "engine/classes/compact_explore.h"
#include "engine/classes/compact_rules.h"
#include "engine/classes/layer_shift.h"
#include "engine/classes/ordered_prefetch.h"
#include "engine/decide/plan_run_cut.h"
#include "engine/decide/stage_store.h"
#include "engine/format/compact/compact_expand.h"
#include "engine/stage/stage_memo.h"

namespace shardproof {
namespace {

using namespace compact;
using Clock = std::chrono::steady_clock;

// Beyond this many corner anchors the plan's classes are too fine to be
// worth it (a condition per coordinate): the answer is unknown.
constexpr size_t kMaxAnchors = 200'000;
// Splits of boxes whose corners disagree, before giving up.
constexpr int kMaxRounds = 8;

// How a finding names its class: it holds in all of it once the classes
// have settled, at a corner of it before.
constexpr std::string_view kWholeClass = "; the same holds at every coordinate of its class ";
constexpr std::string_view kCornerOfClass = "; it is a corner of the class ";

struct Range {
  int64_t lo, hi;
};

// What a corner's classes must agree on (its walk, or its stages' keys).
using Signature = std::function<std::string(const Coord&)>;

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

// Every single-axis comparison in the plan puts a breakpoint at its root r
// (rounded toward zero): the comparison's sign is constant on each side of
// r, and a break at either integer next to r, a class of its own, leaves
// the runs beside it on one side each. (A comparison of several axes
// splits boxes only if their corners disagree.)
void add_condition_breaks(const Condition& cond, std::vector<AxisClasses>& axes) {
  for (const Comparison& k : cond.all)
    for (AxisClasses& a : axes) {
      if (k.diff.mask() != (1u << a.axis)) continue;
      a.add(-k.diff.constant / k.diff.coef[a.axis]);
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
  // A pipeline stage's walk reaches its neighbours' instances (a send's
  // sender, a claim group's receiver) and tests their programs' conditions:
  // the stages within a send's reach of a breakpoint walk differently from
  // the run beyond (pp = 2 reaches stage 1, whose input stage 0's program
  // sends), so each is a class of its own from the start rather than after
  // a round of splits (refine() peels any the walks still tell apart).
  int64_t reach = 0;
  for (const Program& p : g.programs)
    for (const OpTemplate& o : p.ops)
      if (o.kind == OpTemplate::Kind::Send) reach = std::max(reach, std::abs(o.to[kPpAxis]));
  for (AxisClasses& a : axes) {
    if (a.axis != kPpAxis || reach == 0) continue;
    const std::set<int64_t> roots = a.breaks;
    for (int64_t r : roots)
      for (int64_t d = -reach; d <= reach; ++d) a.add(r + d);
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

// The pp axis (index in kAxisNames): anchors are verified one pipeline
// stage at a time.
constexpr int kDpAxis = 0;
static_assert(kAxisNames[kDpAxis] == "dp");

// What one batch of anchors (one pipeline stage) explores: freed with it.
struct Batch {
  Explorer explorer;
  Selection selection, checked;  // checked: every op at every corner, for the ops' own rules
  explicit Batch(const CompactGraph& g) : explorer(g), selection(g), checked(g) {}
};

// A batch made ready for verification (ClassRun::prepare, on a worker
// thread): its corners' records and its selection written, read and cut.
// Nothing in it depends on another batch.
struct Prepared {
  std::vector<Coord> anchors;
  std::vector<std::pair<int64_t, AnchorRecord>> records;  // packed corner -> record
  std::optional<Report> stop;  // unknown (the walk) or invalid (the expansion)
  size_t selected_ops = 0;
  Expansion expansion;  // its origins, for locating findings
  Plan sub;
  std::vector<StageUnit> units;
  std::string digest;  // renamed content (batch_reuse.h)
  // The first pipeline stage of a run of them (pp = lo of a class lo..hi):
  // why the stages further on are not this one's under the layer shift
  // (layer_shift.h), if they are not.
  std::optional<std::string> shift_broken;
  int64_t span = 0;  // hi - lo
  double explore_seconds = 0, read_seconds = 0, cut_seconds = 0;
  double check_seconds = 0, digest_seconds = 0;  // parts of read and cut, for the debug output
};

// Corners are explored and verified one pipeline stage at a time (one batch
// per value of pp on the grid; a single batch without pp): a batch's
// expansion, plan and stages are freed before the next, so memory follows
// the largest pipeline stage, not the plan.
class ClassRun {
 public:
  ClassRun(const Plan& plan, const VerifyOptions& options)
      : round_store_(options.store),
        plan_(plan),
        g_(plan.compact->graph),
        options_(with_round_memory(options)),
        axes_(initial_classes(g_)) {}

  Report run() {
    for (int round = 0; round < kMaxRounds; ++round) {
      std::vector<std::vector<int64_t>> lists = grid();
      size_t count = 1;
      for (const auto& l : lists) count *= l.size();
      if (count > kMaxAnchors)
        return unknown(std::to_string(count) + " corner coordinates to explore (limit " +
                       std::to_string(kMaxAnchors) +
                       "): the plan's conditions cut the mesh too finely");
      const std::vector<std::vector<Coord>> batches = batches_of(lists);
      if (std::getenv("SHARDPROOF_DEBUG_CLASSES"))
        for (size_t i = 0; i < axes_.size(); ++i) {
          std::string points;
          for (int64_t v : lists[i]) points += " " + std::to_string(v);
          std::fprintf(stderr, "round %d, %s corners:%s\n", round,
                       std::string(kAxisNames[axes_[i].axis]).c_str(), points.c_str());
        }
      // Each batch is explored and its stages verified at once (exploring
      // is a fifth of a batch's cost: not done twice). Then the boxes whose
      // corners walked differently are split; then those whose corners'
      // stages key differently. A round that splits has verified for
      // nothing but the verdicts it keeps (round_store_).
      Report all;
      all.verdict = Verdict::Equivalent;
      std::map<std::string, Decided> distinct;  // each key counted once, as first decided
      // The next batch is prepared on a worker thread (prepare() reads only
      // the plan) while this one is verified here, in order, as one thread
      // would. One ahead, not two: each prepared batch holds its sub-plan
      // (two ahead took 1.2 GiB where one takes 0.8 on llama3-405b pp8).
      explored_ = 0;
      const int workers = options_.jobs == 1 ? 0 : 1;
      OrderedPrefetch<std::unique_ptr<Prepared>> ready(batches.size(), workers, 1, [&](size_t i) {
        return prepare(batches[i], run_span(batches[i].front()), workers == 0 ? options_.jobs : 1);
      });
      std::vector<Range> unshifted;  // runs of pipeline stages the layer shift does not carry
      for (size_t i = 0; i < batches.size(); ++i) {
        std::unique_ptr<Prepared> p = ready.take(i);
        for (auto& [packed, record] : p->records) records_[packed] = std::move(record);
        explored_ += static_cast<int64_t>(p->anchors.size());
        explore_seconds_ += p->explore_seconds;
        if (p->stop) return *p->stop;
        report_progress(i + 1, batches.size(), count);  // explored: before its stages
        if (p->shift_broken) {
          const int64_t lo = p->anchors.front()[kPpAxis];
          unshifted.push_back({lo, lo + p->span});
          if (std::getenv("SHARDPROOF_DEBUG_CLASSES"))
            std::fprintf(stderr, "pp=%lld..%lld: no layer shift: %s\n", static_cast<long long>(lo),
                         static_cast<long long>(lo + p->span), p->shift_broken->c_str());
        }
        Report sub = verify_batch(*p, round, distinct);
        if (sub.verdict == Verdict::Invalid || sub.verdict == Verdict::InternalError) return sub;
        merge(all, std::move(sub));
      }
      // A finding is a stage of concrete instances proven wrong, whatever
      // the classes: only *equivalent* needs them settled. Answered now,
      // not after more rounds that split the boxes around it (a wrong shard
      // in one layer of llama3-405b took 4 rounds and 20 GB).
      if (all.verdict == Verdict::NotEquivalent) return finish(std::move(all), distinct, settled());
      // A run whose logical layers are not shifts of each other is verified
      // one pipeline stage at a time (every stage a class of its own).
      if (!unshifted.empty()) {
        for (const Range& r : unshifted)
          for (AxisClasses& a : axes_)
            if (a.axis == kPpAxis)
              for (int64_t v = r.lo; v <= r.hi; ++v) a.add(v);
        continue;
      }
      std::vector<std::vector<Range>> split = disagreeing_boxes(walk_signature());
      if (!split.empty()) {
        refine(split, walk_signature(), "walks");
        continue;
      }
      split = disagreeing_boxes(stage_signature());
      if (!split.empty()) {
        refine(split, stage_signature(), "stages");
        continue;
      }
      return finish(std::move(all), distinct, true);
    }
    return unknown("the coordinate classes did not settle after " + std::to_string(kMaxRounds) +
                   " splits: instances inside a class still differ from its corners");
  }

  ClassRunCounts counts() const { return {batches_verified_, reuse_.reused()}; }

 private:
  // What a corner's walk decided, and which stages its claims' keys are:
  // the corners of a class must agree on both.
  Signature walk_signature() const {
    return [this](const Coord& c) {
      const AnchorRecord& r = records_.at(pack(c));
      return std::to_string(r.decisions) + ":" + std::to_string(r.decision_count);
    };
  }
  Signature stage_signature() const {
    return [this](const Coord& c) { return signatures_.at(pack(c)); };
  }
  bool settled() const {
    return disagreeing_boxes(walk_signature()).empty() &&
           disagreeing_boxes(stage_signature()).empty();
  }

  // The round's report with the run's counts; `settled`: every box's
  // corners agreed, so a finding holds in its whole class.
  Report finish(Report all, const std::map<std::string, Decided>& distinct, bool settled) {
    all.stats.unique_stages = static_cast<int64_t>(distinct.size());
    for (const auto& [key, d] : distinct) count_decided(all.stats, d);
    all.stats.class_anchors = static_cast<int64_t>(records_.size());
    if (std::getenv("SHARDPROOF_DEBUG_CLASSES"))
      std::fprintf(stderr, "batches: %lld, reused %lld\n",
                   static_cast<long long>(batches_verified_),
                   static_cast<long long>(reuse_.reused()));
    all.stats.parallel_ops = op_instance_count(g_);
    all.stats.phases.cut += explore_seconds_;
    // localise() wrote each finding's class as settled; a corner's finding
    // answered before the classes settled holds at its corner only.
    if (!settled)
      for (Finding& f : all.findings)
        if (size_t at = f.message.find(kWholeClass); at != std::string::npos)
          f.message.replace(at, kWholeClass.size(), kCornerOfClass);
    return all;
  }

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

  int64_t pack(const Coord& c) const { return g_.mesh.pack(c); }

  std::vector<std::vector<int64_t>> grid() const {
    std::vector<std::vector<int64_t>> lists;
    for (const AxisClasses& a : axes_) {
      std::set<int64_t> pts;
      for (const Range& r : a.classes()) pts.insert({r.lo, r.hi});
      lists.emplace_back(pts.begin(), pts.end());
    }
    return lists;
  }

  // The grid's points, one list per value of pp. (Not finer: a stage's
  // verdict key follows the order of the expansion it is cut from, so a
  // stage written by two batches with different selections, such as a part
  // set over every dp coordinate, may key differently in each, and the
  // boxes would split.)
  std::vector<std::vector<Coord>> batches_of(const std::vector<std::vector<int64_t>>& lists) const {
    std::map<int64_t, std::vector<Coord>> by_pp;
    each_point(axes_, lists, [&](const Coord& c) { by_pp[c[kPpAxis]].push_back(c); });
    std::vector<std::vector<Coord>> out;
    for (auto& [pp, anchors] : by_pp) out.push_back(std::move(anchors));
    return out;
  }

  // Explores `anchors`, then writes, reads and cuts what they selected, and
  // hashes it up to names. Reads only the plan (runs on a worker thread);
  // `jobs` threads cut.
  std::unique_ptr<Prepared> prepare(const std::vector<Coord>& anchors, int64_t span,
                                    int jobs) const {
    auto p = std::make_unique<Prepared>();
    p->anchors = anchors;
    p->span = span;
    auto b = std::make_unique<Batch>(g_);
    auto start = Clock::now();
    try {
      for (const Coord& c : anchors)
        p->records.emplace_back(pack(c), b->explorer.explore(c, b->selection, b->checked));
    } catch (const ExploreError& e) {
      p->stop = unknown(e.message);
      return p;
    }
    p->explore_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    p->selected_ops = b->selection.op_count();
    start = Clock::now();
    auto invalid = [&](const plan_detail::InvalidPlan& e) {
      Report r;
      r.plan_path = plan_.path;
      r.plan_name = plan_.name;
      r.verdict = Verdict::Invalid;
      r.invalid = e.diag;
      p->stop = std::move(r);
      return std::move(p);
    };
    // The ops' own rules are checked beside the reading when a second core
    // may be used (they read only the plan); a rule broken there is still
    // the one reported first, as when it was checked before.
    std::optional<plan_detail::InvalidPlan> read_error;
    {
      Expansion checked;
      try {
        checked = expand_selected(g_, b->checked);
      } catch (const plan_detail::InvalidPlan& e) {
        return invalid(e);
      }
      auto check = [&] {
        check_selected(plan_, checked);
        p->check_seconds = std::chrono::duration<double>(Clock::now() - start).count();
      };
      std::future<void> beside;
      if (options_.jobs != 1)
        beside = std::async(std::launch::async, check);
      else
        try {
          check();
        } catch (const plan_detail::InvalidPlan& e) {
          return invalid(e);
        }
      try {
        p->expansion = expand_selected(g_, b->selection);
        // The walk is written out: its memory goes before the text is read
        // (reading it is a batch's peak; read_selected frees the text), and
        // the name index once it is read.
        b.reset();
        p->sub = read_selected(plan_, p->expansion);
        decltype(p->expansion.tensor_index)().swap(p->expansion.tensor_index);
      } catch (const plan_detail::InvalidPlan& e) {
        read_error = e;
      }
      if (beside.valid()) try {
          beside.get();
        } catch (const plan_detail::InvalidPlan& e) {
          return invalid(e);
        }
    }
    if (read_error) return invalid(*read_error);
    p->read_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    start = Clock::now();
    p->units = cut_units(p->sub, jobs);
    const Clock::time_point digest_start = Clock::now();
    p->digest = renamed_content_digest(p->sub, p->units);
    if (span > 0) p->shift_broken = check_layer_shift(g_, p->sub, p->expansion, p->units, span);
    p->digest_seconds = std::chrono::duration<double>(Clock::now() - digest_start).count();
    p->cut_seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return p;
  }

  // hi - lo when `anchor` is the first pipeline stage of a class lo..hi of
  // several, else 0: the stages the layer shift must carry it to.
  int64_t run_span(const Coord& anchor) const {
    for (const AxisClasses& a : axes_)
      if (a.axis == kPpAxis)
        for (const Range& r : a.classes())
          if (r.lo == anchor[kPpAxis]) return r.hi - r.lo;
    return 0;
  }

  // One line per pipeline stage explored: corners explored so far, and how
  // many batches before it took an earlier one's result.
  void report_progress(size_t done, size_t batches, size_t corners) const {
    if (!options_.progress) return;
    VerifyProgress p;
    p.done = explored_;
    p.total = static_cast<int64_t>(corners);
    p.stage = "pipeline stage " + std::to_string(done) + "/" + std::to_string(batches) + ", " +
              std::to_string(reuse_.reused()) + " reused";
    p.status = "exploring";
    options_.progress(p);
  }

  // The corners of `box`, per axis its one or two ends; along axis `low_only`
  // (if any) its low end only.
  static std::vector<std::vector<int64_t>> corners_of(const std::vector<Range>& box,
                                                      size_t low_only = SIZE_MAX) {
    std::vector<std::vector<int64_t>> out;
    for (size_t j = 0; j < box.size(); ++j)
      out.push_back(j == low_only || box[j].lo == box[j].hi
                        ? std::vector<int64_t>{box[j].lo}
                        : std::vector<int64_t>{box[j].lo, box[j].hi});
    return out;
  }

  // The boxes whose corners do not all give the same `signature`.
  std::vector<std::vector<Range>> disagreeing_boxes(const Signature& signature) const {
    std::vector<std::vector<Range>> out;
    std::vector<std::vector<Range>> classes;
    for (const AxisClasses& a : axes_) classes.push_back(a.classes());
    std::vector<size_t> at(classes.size(), 0);
    for (;;) {
      std::vector<Range> box;
      for (size_t i = 0; i < classes.size(); ++i) box.push_back(classes[i][at[i]]);
      std::optional<std::string> first;
      bool agree = true;
      each_point(axes_, corners_of(box), [&](const Coord& c) {
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

  // Splits a disagreeing box in two along each axis its corners disagree
  // on (two corners apart on that axis alone with different `signature`s:
  // if no such pair exists, all corners agree). Splitting along every axis
  // multiplied the corners by 2^axes a round: a wrong shard on one stage of
  // llama3-405b reached 23,296. `why` (the corners' walks or their stages)
  // for the debug output.
  void refine(const std::vector<std::vector<Range>>& boxes, const Signature& signature,
              const char* why) {
    if (std::getenv("SHARDPROOF_DEBUG_CLASSES"))
      for (size_t i = 0; i < boxes.size() && i < 5; ++i)
        std::fprintf(stderr, "split %s (%s differ)\n", class_text(axes_, boxes[i]).c_str(), why);
    // A run of pipeline stages is also peeled at both ends: its walks
    // differ where they reach the first or last stage's own program (a
    // send from pp - 1, a claim group reaching pp + 1), a stage or two from
    // its ends, and its middle is then one class.
    for (const std::vector<Range>& box : boxes)
      for (size_t i = 0; i < box.size(); ++i) {
        if (box[i].hi == box[i].lo || !disagree_along(box, i, signature)) continue;
        axes_[i].add(box[i].lo + (box[i].hi - box[i].lo) / 2);
        if (axes_[i].axis == kPpAxis) {
          axes_[i].add(box[i].lo + 1);
          axes_[i].add(box[i].hi - 1);
        }
      }
  }

  // Whether two corners of `box` that differ on axis i alone have different
  // signatures.
  bool disagree_along(const std::vector<Range>& box, size_t i, const Signature& signature) const {
    bool differ = false;
    each_point(axes_, corners_of(box, i), [&](Coord c) {
      const std::string lo = signature(c);
      c[axes_[i].axis] = box[i].hi;
      differ |= lo != signature(c);
    });
    return differ;
  }

  // Verifies what a batch selected (or takes the verification of an earlier
  // batch equal to it up to names, batch_reuse.h); keeps each anchor's
  // stage signature and names the coordinates of each finding.
  Report verify_batch(Prepared& p, int round, std::map<std::string, Decided>& distinct) {
    ++batches_verified_;
    if (const VerifiedBatch* same = reuse_.find(p.digest)) {
      reuse_.count_reuse();
      for (const Coord& c : p.anchors)
        signatures_[pack(c)] = stage_keys(c, p.sub, same->verdict_keys, same->unit_of);
      distinct.insert(same->decided.begin(), same->decided.end());
      debug_batch(round, p, same->verdict_keys, "reused");
      Report r = same->report;
      r.stats.phases = {};
      r.stats.phases.parse = p.read_seconds;
      r.stats.phases.cut = p.cut_seconds;
      return r;
    }
    StageRecord record;
    Report r = verify_expanded_cut(p.sub, std::move(p.units), p.cut_seconds, options_, &record);
    r.stats.phases.parse += p.read_seconds;
    std::vector<int> unit_of(p.sub.parallel.tensors.size(), -1);
    for (size_t u = 0; u < record.units.size(); ++u)
      for (int t : record.units[u].members) unit_of[t] = static_cast<int>(u);
    for (const Coord& c : p.anchors)
      signatures_[pack(c)] = stage_keys(c, p.sub, record.verdict_keys, unit_of);
    distinct.insert(record.decided.begin(), record.decided.end());
    debug_batch(round, p, record.verdict_keys, "verified");
    reuse_.keep(p.digest, r, record, std::move(unit_of));
    localise(r, p.sub, p.expansion);
    return r;
  }

  void debug_batch(int round, const Prepared& p, const std::vector<std::string>& verdict_keys,
                   const char* how) const {
    if (std::getenv("SHARDPROOF_DEBUG_CLASSES")) {
      std::set<std::string> verdicts(verdict_keys.begin(), verdict_keys.end());
      std::fprintf(
          stderr,
          "round %d, pp=%lld dp=%lld: %zu anchors, %zu ops, %zu stages, %zu distinct verdict "
          "keys, %s; explore %.2f s, check %.2f, expand and read %.2f, cut %.2f, digest %.2f "
          "(explored so far %.2f s), memo %zu\n",
          round, static_cast<long long>(p.anchors.front()[kPpAxis]),
          static_cast<long long>(p.anchors.front()[kDpAxis]), p.anchors.size(), p.selected_ops,
          verdict_keys.size(), verdicts.size(), how, p.explore_seconds, p.check_seconds,
          p.read_seconds - p.check_seconds, p.cut_seconds - p.digest_seconds, p.digest_seconds,
          explore_seconds_, identity_memo_.size());
    }
  }

  // Folds a batch's report into the run's (not the counts of distinct
  // stages: a key may be decided in several batches; run() counts the keys).
  static void merge(Report& all, Report sub) {
    if (all.findings.empty() && all.stats.stages == 0) {
      all.meta = sub.meta;
      all.stats.logical_ops = sub.stats.logical_ops;
    }
    if (verdict_severity(sub.verdict) > verdict_severity(all.verdict)) all.verdict = sub.verdict;
    for (Finding& f : sub.findings) all.findings.push_back(std::move(f));
    Stats& a = all.stats;
    const Stats& s = sub.stats;
    a.stages += s.stages;
    a.phases.parse += s.phases.parse;
    a.phases.cut += s.phases.cut;
    a.phases.key += s.phases.key;
    a.phases.decide += s.phases.decide;
  }

  // The verdict keys of the stages of `c`'s claims, in order.
  std::string stage_keys(const Coord& c, const Plan& sub,
                         const std::vector<std::string>& verdict_keys,
                         const std::vector<int>& unit_of) const {
    std::string s;
    for (const SeedClaim& seed : records_.at(pack(c)).seeds) {
      const TensorTemplate& t = g_.programs[seed.program].tensors[seed.element];
      const int index = sub.parallel.find(t.name.eval(seed.c));
      const int unit = index < 0 ? -1 : unit_of[index];
      // A claim with no stage, or a stage with no key, matches nothing.
      if (unit < 0 || verdict_keys.size() <= static_cast<size_t>(unit) ||
          verdict_keys[unit].empty())
        return "?" + std::to_string(pack(c));
      s += verdict_keys[unit];
      s += ';';
    }
    return s;
  }

  // Says at which mesh coordinates (and in which class) each finding shows:
  // its first parallel tensor's, then the other classes of those failing
  // with it (a group bug spans several).
  void localise(Report& r, const Plan& sub, const Expansion& expansion) const {
    for (Finding& f : r.findings) {
      std::vector<std::string> classes;
      std::string first;
      for (const auto* names : {&f.parallel_tensors, &f.also_failing}) {
        for (const std::string& name : *names) {
          const int index = sub.parallel.find(name);
          if (index < 0) continue;
          const Origin& o = expansion.tensors[index];
          Coord c{};
          for (int a = 0; a < kAxisCount; ++a) c[a] = o.c[a];
          std::vector<Range> box;
          for (const AxisClasses& a : axes_)
            for (const Range& k : a.classes())
              if (c[a.axis] >= k.lo && c[a.axis] <= k.hi) box.push_back(k);
          const std::string text = class_text(axes_, box);
          if (first.empty()) first = g_.mesh.describe(c, true);
          if (std::find(classes.begin(), classes.end(), text) == classes.end())
            classes.push_back(text);
        }
      }
      if (classes.empty()) continue;
      f.message += " [at mesh coordinates " + first + std::string(kWholeClass) + classes.front();
      for (size_t i = 1; i < classes.size(); ++i)
        f.message += (i == 1 ? "; also failing in the classes " : ", ") + classes[i];
      f.message += "]";
    }
  }

  // A refinement round decides mostly the stages of the round before: keys
  // are kept across rounds unless the caller keeps them, and outcomes in
  // memory, in front of the caller's store.
  VerifyOptions with_round_memory(VerifyOptions o) {
    if (!o.identity_memo) o.identity_memo = &identity_memo_;
    o.store = &round_store_;
    return o;
  }

  StageIdentityMemo identity_memo_;
  BatchReuse reuse_;              // verified batches by renamed content, across rounds
  int64_t batches_verified_ = 0;  // of which reuse_.reused() were taken from it
  MemoryVerdictStore round_store_;
  const Plan& plan_;
  const CompactGraph& g_;
  const VerifyOptions options_;
  std::vector<AxisClasses> axes_;
  std::unordered_map<int64_t, AnchorRecord> records_;
  std::unordered_map<int64_t, std::string> signatures_;  // verdict keys of each corner's claims
  int64_t explored_ = 0;
  double explore_seconds_ = 0;
};

}  // namespace

Report verify_by_classes(const Plan& plan, const VerifyOptions& options, ClassRunCounts* counts) {
  auto start = Clock::now();
  Report report;
  try {
    if (std::optional<Report> broken = check_compact_rules(plan)) {
      report = std::move(*broken);
    } else {
      ClassRun run(plan, options);
      report = run.run();
      if (counts) *counts = run.counts();
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
