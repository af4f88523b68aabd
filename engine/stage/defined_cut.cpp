#include "engine/stage/defined_cut.h"

#include <optional>

namespace shardproof {
namespace {

// The tensors a walk back from `t` writes, or nullopt when it reaches a
// logical input outside `held` or needs more than kMaxDefiningOps ops.
std::optional<std::set<int>> defining_walk(const Graph& log, int t, const std::set<int>& held) {
  std::set<int> ops, written;
  std::vector<int> work = {t};
  while (!work.empty()) {
    const int u = work.back();
    work.pop_back();
    // `t` itself may be held (read by the cone): its walk starts anyway.
    if ((u != t && held.count(u)) || written.count(u)) continue;
    const int op = log.producer[static_cast<size_t>(u)];
    if (op < 0) return std::nullopt;  // a free value the logical side never reads
    if (!ops.insert(op).second) continue;
    if (static_cast<int>(ops.size()) > kMaxDefiningOps) return std::nullopt;
    const Op& o = log.ops[static_cast<size_t>(op)];
    written.insert(o.out.begin(), o.out.end());
    for (int in : o.in) work.push_back(in);
  }
  return written;
}

}  // namespace

std::vector<int> defined_cut_tensors(const Graph& log, const std::vector<int>& cut,
                                     std::set<int> held) {
  std::vector<int> defined;
  std::vector<char> done(cut.size(), 0);
  // A tensor defined may hold what another's walk ends at: to a fixpoint.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < cut.size(); ++i) {
      if (done[i]) continue;
      std::optional<std::set<int>> written = defining_walk(log, cut[i], held);
      if (!written) continue;
      done[i] = 1, changed = true;
      defined.push_back(cut[i]);
      held.insert(written->begin(), written->end());
    }
  }
  return defined;
}

}  // namespace shardproof
