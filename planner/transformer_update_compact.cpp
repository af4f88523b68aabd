// The optimizer half of the step in the compact form: per parameter piece
// and stage, the gradient accumulated over micro-batches as one chain of
// templates (the first link adds micro-batch 0 and 1, later links add one
// more, the last one carries the claim), the data-parallel all-reduce over
// the dp axis, and the optimizer step, each written once.
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string compact_unsupported(const Layout& s) {
  if (s.cp > 1) return "--cp";
  if (s.sp) return "--sp";
  if (s.zero > 0) return "--zero";
  if (s.tie) return "--tie-embeddings";
  // A gather in reverse rank order: the compact form orders a group's
  // members by their coordinates.
  if (s.c.bug == "reshard-gather-order") return "--bug " + s.c.bug;
  // The MoE bugs' sites are not written as conditions yet.
  for (const BugSpec& b : moe_bug_table())
    if (s.c.bug == b.info.name) return "--bug " + s.c.bug + " (an MoE bug)";
  // A kv head shared by several tp ranks is head t / replicas: not affine.
  if (s.tp > s.NKV) return "tp (" + str(s.tp) + ") above the kv heads (" + str(s.NKV) + ")";
  return "";
}

void Builder::update_piece_compact(const Param& p) {
  const Coord x = devices(p.stage).front();
  const std::vector<std::string>& whats = grad_whats_[{grad_key(x), p.local}];
  // One contribution per micro-batch (compact_unsupported rules out the
  // tied table, the one piece with two).
  if (whats.size() != 1)
    throw std::logic_error("transformer planner: compact gradient of " + p.local +
                           " has not one contribution per micro-batch");
  const Ix mb = Ix::axis("mb");
  auto term = [&](const Ix& m) {
    Coord xm = x;
    xm.m = m;
    return at(xm, whats[0]);
  };
  const Shape shape = g.shape(term(mb));
  const bool sync_dp = s.dp * s.cp > 1 && dp_replicated(p);
  auto claimed = [&](const std::string& local) {
    declare(x, local, grad(p.logical), slice_of(x, p.full, p.spec));
  };
  auto plain = [&](const std::string& local) { g.tensor(x, local, shape, std::nullopt, "f32"); };

  const std::string acc = at_rank(x, grad(p.local) + ".acc");
  std::string cur;
  if (s.mb == 1) {
    cur = term(0);
    if (!sync_dp) {
      claimed(acc);
      g.op(acc, "scale", {cur}, {acc}, {{"factor", 1}});
      cur = acc;
    }
  } else {
    // acc{k} = acc{k-1} + term{k} for k >= 1, where acc{0} is term{0}.
    const int M = s.mb;
    const std::string link = acc + mb.text(), before = acc + Ix::axis("mb", -1).text();
    if (M >= 3) {
      Graph::When middle(g, "mb >= 1 && mb <= " + str(M - 2));
      plain(link);
    }
    {
      Graph::When final(g, "mb == " + str(M - 1));
      sync_dp ? plain(link) : claimed(link);
    }
    {
      Graph::When first(g, "mb == 1");
      g.op(link, "add", {term(Ix::axis("mb", -1)), term(mb)}, {link});
    }
    if (M >= 3) {
      Graph::When later(g, "mb >= 2");
      g.op(link, "add", {before, term(mb)}, {link});
    }
    cur = acc + str(M - 1);
  }

  if (sync_dp) {
    const std::string out = at_rank(x, grad(p.local) + ".dp");
    claimed(out);
    Coord first = x;  // the collective is named at its first member
    first.d = 0;
    first.c = 0;
    dp_sync(p, first, {cur}, {out}, dp_cp_group(x));
    cur = out;
  }
  step(p, x, cur, false);
}

}  // namespace shardproof::planner::transformer
