#include "engine/infer/claim_choice.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace shardproof::infer {
namespace {

// A frontier larger than this says nothing useful about where a tensor sits:
// it is kept as unknown and cones are measured from the logical inputs.
constexpr size_t kMaxFrontier = 64;
// Cones are counted up to this many ops; beyond it they all tie.
constexpr int kMaxCone = 4096;

using TensorSet = std::set<int>;

// Value classes of the logical graph: tensors computed by the same op, with
// the same attributes, from tensors of the same classes share a class (a
// recomputation; every op is a function of its inputs and attributes).
std::vector<int> value_classes(const Graph& g) {
  std::vector<int> cls(g.tensors.size(), -1);
  int next = 0;
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (g.producer[t] < 0) cls[t] = next++;
  std::map<std::string, int> seen;
  for (int op_index : g.topo_order) {
    const Op& op = g.ops[static_cast<size_t>(op_index)];
    std::string key = op.op + '|';
    for (const auto& [name, attr] : op.attrs) key += name + '=' + attr.describe() + ';';
    for (int r : op.group) key += std::to_string(r) + ',';
    key += '|';
    for (int in : op.in) key += std::to_string(cls[static_cast<size_t>(in)]) + ',';
    for (size_t k = 0; k < op.out.size(); ++k) {
      auto [it, fresh] = seen.emplace(key + '#' + std::to_string(k), next);
      if (fresh) ++next;
      cls[static_cast<size_t>(op.out[k])] = it->second;
    }
  }
  return cls;
}

// Walks the logical graph back from `target` to the tensors whose class is
// in `stop` (and the inputs), calling `reached(t)` at each stopping tensor.
// Returns the number of ops walked (at most kMaxCone).
template <typename Reached>
int walk_cone(const Graph& logical, const std::vector<int>& cls, int target,
              const std::set<int>& stop, Reached reached) {
  std::vector<char> seen(logical.tensors.size(), 0);
  std::vector<int> work = {target};
  int ops = 0;
  while (!work.empty() && ops < kMaxCone) {
    const int t = work.back();
    work.pop_back();
    if (seen[static_cast<size_t>(t)]) continue;
    seen[static_cast<size_t>(t)] = 1;
    if (stop.count(cls[static_cast<size_t>(t)])) {
      reached(t);
      continue;
    }
    const int op = logical.producer[static_cast<size_t>(t)];
    if (op < 0) continue;
    ++ops;
    for (int in : logical.ops[static_cast<size_t>(op)].in) work.push_back(in);
  }
  return ops;
}

class Chooser {
 public:
  Chooser(const Plan& plan, std::vector<std::vector<InferredClaim>> candidates)
      : plan_(plan), cls_(value_classes(plan.logical)), candidates_(std::move(candidates)) {
    const size_t n = plan.parallel.tensors.size();
    candidates_.resize(n);
    claim_.resize(n);
    frontier_.assign(n, TensorSet{});
    reads_.assign(n, TensorSet{});
    votes_.resize(n);
    for (size_t t = 0; t < n; ++t)
      if (plan.parallel.tensors[t].of) claim_[t] = plan.parallel.tensors[t].of;
  }

  std::vector<InferredClaim> run() {
    choose_classes();
    choose_members();
    std::vector<InferredClaim> chosen;
    for (size_t t = 0; t < claim_.size(); ++t)
      if (claim_[t] && !plan_.parallel.tensors[t].of)
        chosen.push_back(InferredClaim{static_cast<int>(t), *claim_[t]});
    return chosen;
  }

 private:
  int cls_of_claim(size_t t) const { return cls_[static_cast<size_t>(claim_[t]->logical)]; }

  // The claimed parallel tensors an op reads through unclaimed ones;
  // nullopt when too many to say.
  std::optional<TensorSet> op_reads(const Op& op) const {
    TensorSet reads;
    for (int in : op.in) {
      const std::optional<TensorSet>& f = frontier_[static_cast<size_t>(in)];
      if (!f) return std::nullopt;
      reads.insert(f->begin(), f->end());
      if (reads.size() > kMaxFrontier) return std::nullopt;
    }
    return reads;
  }

  std::set<int> stop_classes(const std::optional<TensorSet>& reads) const {
    std::set<int> stop;
    if (reads)
      for (int f : *reads) stop.insert(cls_of_claim(static_cast<size_t>(f)));
    return stop;
  }

  // Forward: each tensor takes the candidate whose logical cone from the
  // classes its frontier claims is smallest but not empty (an empty cone
  // re-claims, maybe scaled, what the op read: r0.dh = d/6 is also 2 x dh,
  // the tensor the logical consumers read); then an unscaled one; then the
  // one computed first (the forward tensor of a recomputed pair).
  void choose_classes() {
    const Graph& par = plan_.parallel;
    for (int op_index : par.topo_order) {
      const Op& op = par.ops[static_cast<size_t>(op_index)];
      const std::optional<TensorSet> reads = op_reads(op);
      const std::set<int> stop = stop_classes(reads);
      for (int out : op.out) {
        const size_t t = static_cast<size_t>(out);
        reads_[t] = reads;
        if (!claim_[t]) pick_candidate(t, stop);
        frontier_[t] = claim_[t] ? std::optional<TensorSet>(TensorSet{out}) : reads;
      }
    }
  }

  void pick_candidate(size_t t, const std::set<int>& stop) {
    std::vector<InferredClaim>& mine = candidates_[t];
    using Score = std::tuple<bool, int, int, int, int>;
    std::optional<Score> best_score;
    size_t best = 0;
    for (size_t i = 0; i < mine.size(); ++i) {
      const Lineage& of = mine[i].of;
      const int producer = plan_.logical.producer[static_cast<size_t>(of.logical)];
      const int early = producer < 0 ? -1 : plan_.logical.topo_rank[static_cast<size_t>(producer)];
      const int cone = walk_cone(plan_.logical, cls_, of.logical, stop, [](int) {});
      const Score score{cone == 0, cone, of.scaled() ? 1 : 0, early, of.logical};
      if (!best_score || score < *best_score) best_score = score, best = i;
    }
    if (best_score) claim_[t] = mine[best].of;
  }

  // Backward: an inferred claim may name any tensor of its class (they hold
  // equal values); it names the one that the logical cones of the claims
  // reading it reach, so the cut stops there and the cones stay small. A
  // block that another tensor of the rank already names is passed over for
  // another voted member: a value computed twice in both graphs (a tied
  // weight's gradient squared once per module that lists it) has two
  // logical twins that the readers' cones reach, and one claimed twice
  // leaves the other uncut, its cone running back through the whole step.
  void choose_members() {
    const Graph& par = plan_.parallel;
    for (size_t t = 0; t < claim_.size(); ++t)
      if (plan_.parallel.tensors[t].of) named_.insert(block_key(t, claim_[t]->logical));
    for (auto it = par.topo_order.rbegin(); it != par.topo_order.rend(); ++it) {
      const Op& op = par.ops[static_cast<size_t>(*it)];
      for (int out : op.out) {
        const size_t t = static_cast<size_t>(out);
        if (!claim_[t]) continue;
        if (!plan_.parallel.tensors[t].of) {
          if (!votes_[t].empty()) rename(t, most_voted(t));
          named_.insert(block_key(t, claim_[t]->logical));
        }
        vote_for_frontier(t);
      }
    }
  }

  // The most voted member whose block the rank does not name yet; else the
  // most voted.
  int most_voted(size_t t) const {
    int best = -1, count = 0, free_best = -1, free_count = 0;
    for (const auto& [member, n] : votes_[t]) {
      if (n > count) best = member, count = n;
      if (n > free_count && !named_.count(block_key(t, member))) free_best = member, free_count = n;
    }
    return free_best >= 0 ? free_best : best;
  }

  // A claim's block on its rank: (rank, logical member, slice, scale).
  using BlockKey = std::tuple<int, int, SliceSpec, int64_t, int64_t>;
  BlockKey block_key(size_t t, int member) const {
    const Lineage& of = *claim_[t];
    return {plan_.parallel.tensors[t].rank, member, of.slice, of.scale_num, of.scale_den};
  }

  void rename(size_t t, int member) {
    claim_[t]->logical = member;
    claim_[t]->tensor = plan_.logical.tensors[static_cast<size_t>(member)].name;
  }

  void vote_for_frontier(size_t t) {
    const std::optional<TensorSet>& reads = reads_[t];
    if (!reads || reads->empty()) return;
    walk_cone(plan_.logical, cls_, claim_[t]->logical, stop_classes(reads), [&](int reached) {
      for (int f : *reads)
        if (cls_of_claim(static_cast<size_t>(f)) == cls_[static_cast<size_t>(reached)])
          ++votes_[static_cast<size_t>(f)][reached];
    });
  }

  const Plan& plan_;
  std::vector<int> cls_;
  std::vector<std::vector<InferredClaim>> candidates_;
  std::vector<std::optional<Lineage>> claim_;       // the plan's own or the chosen one
  std::vector<std::optional<TensorSet>> frontier_;  // claimed parallel tensors reached
  std::vector<std::optional<TensorSet>> reads_;     // the frontier of the producer's inputs
  std::vector<std::map<int, int>> votes_;           // logical member -> votes
  std::set<BlockKey> named_;                        // blocks named so far
};

}  // namespace

std::vector<InferredClaim> choose_claims(const Plan& plan,
                                         std::vector<std::vector<InferredClaim>> candidates) {
  return Chooser(plan, std::move(candidates)).run();
}

}  // namespace shardproof::infer
