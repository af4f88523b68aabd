// Megatron's expert mesh with expert tensor parallelism below tp (--etp):
// the expert layers re-factor the tp x dp ranks of a stage as ep x etp x edp
// (Megatron's expert RankGenerator, order tp-cp-ep-dp-pp with cp 1 there:
// etp fastest). Rank
// (d, t) is etp rank k = t % etp of the token split j = t / etp; its
// expert-dp index q = d * (tp / etp) + j has ep rank q % ep and edp rank
// q / ep (at etp == tp, q == d: the dp re-factoring of moe_layout.cpp).
//
// Attention and the dense parts stay tp-sharded and every tp rank still
// routes its dp rank's whole sequences (the router is replicated over tp;
// under sp and cp the tokens are first gathered into them, moe_seq.cpp;
// each cp rank has its own ep groups, as at etp = tp).
// The tp ranks of one etp rank then split those sequences: split j sends
// block j of the tp / etp blocks of its sequences through the all_to_all
// over its ep group (the ep consecutive q of its etp rank), so a token's
// slots reach an expert once, not tp / etp times. The expert ffn is split
// over etp (partials all-reduced over the etp group; nothing to sum at etp
// 1). What comes back is all-gathered over the splits into the whole
// sequences, and the combine runs as before. An expert block's gradient is
// summed over its edp group (the q with its ep rank, its etp rank) x cp;
// ZeRO shards it over that group (transformer_update.cpp), and --clip sums
// the experts' squares over the ranks of one edp index (etp_norm_group).
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kSlots = {Ax::Batch, Ax::Full, Ax::Full, Ax::Full};
const Spec kSplit = {Ax::EtpBatch, Ax::Full, Ax::Full, Ax::Full};

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

int Builder::expert_dp(const Coord& x) const {
  if (!s.etp_split()) return int(x.d);
  return int(x.d) * s.etp_splits() + int(x.t) / s.etp;
}

Coord Builder::expert_coord(Coord x, int q) const {
  const int k = int(x.t) % s.etp;
  x.d = q / s.etp_splits();
  x.t = (q % s.etp_splits()) * s.etp + k;
  return x;
}

Aff Builder::etp_rank(const Coord& x) const {
  if (!sym()) return int(x.t) % s.etp;
  return mesh().number(x, mesh().etp_axes());
}

Aff Builder::token_split(const Coord& x) const {
  if (!sym()) return int(x.t) / s.etp;
  return mesh().number(x, mesh().split_axes());
}

std::string Builder::split_side(const Coord& x, const std::string& name) const {
  return s.etp_split() ? at(x, name) + ".split" : at(x, name);
}

std::string Builder::returned_side(const Coord& x, const std::string& name) const {
  return s.ep > 1 ? at(x, name) + ".back" : at(x, name);
}

std::vector<Coord> Builder::etp_members(const Coord& x) const {
  std::vector<Coord> members;
  Coord xt = x;
  const int first = int(x.t) / s.etp * s.etp;
  for (int t = first; t < first + s.etp; ++t) {
    xt.t = t;
    members.push_back(xt);
  }
  return members;
}

void Builder::split_tokens(Coord x0, int i, const std::string& name) {
  if (!s.etp_split()) return;
  const Shape slots = {s.B, s.E, s.C, s.H};
  const int64_t len = s.local_batch() / s.etp_splits();
  const bool tokens = name == layer(i) + ".moe.xin";
  each_dp_cp(x0, [&](const Coord& xd) {
    each_tp(xd, [&](const Coord& x) {
      const std::string out = claim(x, split_side(x, name), name, slots, kSplit);
      // Bug: the tokens are not split: every tp rank sends split 0.
      branch(tokens ? moe_site("etp-tokens-not-split", i, x) : BugSite{}, [&](bool buggy) {
        const Aff j = buggy ? Aff(0) : token_split(x);
        op(x, name + ".split", "slice", {at(x, name)}, {out},
           {{"dim", 0}, {"start", (j * len).attr()}, {"end", (j * len + len).attr()}});
      });
    });
  });
}

void Builder::gather_splits(Coord x0, const std::string& name) {
  if (!s.etp_split()) return;
  const Shape slots = {s.B, s.E, s.C, s.H};
  const bool ref = name == layer(s.moe_bug_layer()) + ".moe.out";
  if (sym()) {
    // One template: the splits' group (its axes), named at its first
    // member (the bug's reversed order is refused: compact_unsupported).
    each_dp_cp(x0, [&](const Coord& xd) {
      each_tp(xd, [&](const Coord& x) {
        const std::string in = returned_side(x, name);
        const std::string out = claim(x, token_side(x, name), name, slots, kSlots);
        const Coord xg = mesh().zeroed(x, mesh().split_axes());
        collective(at(xg, name + ".split_all_gather"), "all_gather", {in}, {out},
                   Group::along(mesh().split_axes()), {{"dim", 0}});
      });
    });
    return;
  }
  each_dp_cp(x0, [&](const Coord& xd) {
    for (int k = 0; k < s.etp; ++k) {
      Coord xg = xd;  // named at the group's first member
      xg.t = k;
      std::vector<std::string> in, out;
      std::vector<int> ranks;
      for (int j = 0; j < s.etp_splits(); ++j) {
        Coord x = xd;
        x.t = j * s.etp + k;
        in.push_back(returned_side(x, name));
        out.push_back(claim(x, token_side(x, name), name, slots, kSlots));
        ranks.push_back(rank(x));
      }
      Group group = ranks;
      // Bug: the splits concatenated in reverse rank order.
      if (ref && moe_fires("etp-split-gather-reversed", -1, xg)) reverse_members(in, out, group);
      collective(at(xg, name + ".split_all_gather"), "all_gather", in, out, group, {{"dim", 0}});
    }
  });
}

void Builder::expert_sum(Coord x0, const std::string& name,
                         const std::function<void(const Coord&, const std::string&)>& produce) {
  const Shape slots = {s.B, s.E, s.C, s.H};
  const Spec spec = expert_spec(Ax::Full);
  if (!s.etp_split()) {
    each_dp_cp(x0, [&](const Coord& x) { tp_sum(x, name, slots, spec, -1, name, produce); });
    return;
  }
  if (sym()) return expert_sum_compact(x0, name, produce);
  each_dp_cp(x0, [&](const Coord& xd) {
    for (int j = 0; j < s.etp_splits(); ++j) {
      Coord xg = xd;
      xg.t = j * s.etp;
      if (s.etp == 1) {
        produce(xg, act(xg, name, slots, spec));
        continue;
      }
      std::vector<std::string> parts, outs;
      std::vector<int> ranks;
      for (const Coord& xt : etp_members(xg)) {
        const Part part{Aff(int64_t(int(xt.t) % s.etp)), s.etp};
        parts.push_back(claim(xt, at(xt, name + ".part"), name, slots, spec, part));
        produce(xt, parts.back());
        outs.push_back(act(xt, name, slots, spec));
        ranks.push_back(rank(xt));
      }
      const std::string op_name = at(xg, name + ".etp_all_reduce");
      const auto hook = moe_tp_sum_bug(name, xg);
      branch(hook.second, [&](bool buggy) {
        if (!buggy || hook.first != "skip")
          return collective(op_name, "all_reduce", parts, outs, Group(ranks), {{"reduce", "sum"}});
        // Each rank goes on with its own part.
        for (size_t k = 0; k < parts.size(); ++k)
          collective(op_name + ".solo" + str(int64_t(k)), "all_reduce", {parts[k]}, {outs[k]},
                     Group{ranks[k]}, {{"reduce", "sum"}});
      });
    }
  });
}

// The compact form: one rank's part (etp rank k of etp), all-reduced over
// the etp axis, named at the group's first member.
void Builder::expert_sum_compact(
    Coord x0, const std::string& name,
    const std::function<void(const Coord&, const std::string&)>& produce) {
  const Shape slots = {s.B, s.E, s.C, s.H};
  const Spec spec = expert_spec(Ax::Full);
  each_dp_cp(x0, [&](const Coord& xd) {
    each_tp(xd, [&](const Coord& x) {
      if (s.etp == 1) return produce(x, act(x, name, slots, spec));
      const std::string part =
          claim(x, at(x, name + ".part"), name, slots, spec, Part{etp_rank(x), s.etp});
      produce(x, part);
      const std::string out = act(x, name, slots, spec);
      const Coord xg = mesh().zeroed(x, mesh().etp_axes());
      const std::string op_name = at(xg, name + ".etp_all_reduce");
      const auto hook = moe_tp_sum_bug(name, xg);
      branch(hook.second, [&](bool buggy) {
        if (!buggy || hook.first != "skip")
          return collective(op_name, "all_reduce", {part}, {out}, Group::along(mesh().etp_axes()),
                            {{"reduce", "sum"}});
        // Each rank goes on with its own part.
        collective(op_name + ".solo" + etp_rank(x).text(), "all_reduce", {part}, {out},
                   solo_group(x), {{"reduce", "sum"}});
      });
    });
  });
}

std::vector<int> Builder::etp_norm_group(const Coord& x) const {
  // --clip: the ranks whose expert pieces differ. Each rank holds the block
  // of its ep rank, etp shard of its etp rank: the ranks of x's edp index
  // (its ep group x etp group) hold each piece once, on every stage; under
  // ZeRO every rank holds its own shard of its block. Replicas over edp
  // and cp get the same total. Bug: without the other ranks of the ep
  // group (only x's etp group).
  const bool missing_ep = s.bug("clip-norm-missing-ep");
  std::vector<int> group;
  for (int p = 0; p < s.pp; ++p)
    for (int d = 0; d < s.dp; ++d)
      for (int c = 0; c < s.cp; ++c)
        for (int t = 0; t < s.tp; ++t) {
          const Coord y{d, c, t, p, 0};
          const bool same_block = missing_ep ? expert_dp(y) == expert_dp(x)
                                             : expert_dp(y) / s.ep == expert_dp(x) / s.ep;
          if (s.zero == 0 || missing_ep)
            if (!same_block || c != int(x.c)) continue;
          group.push_back(s.rank(d, c, t, p));
        }
  return group;
}

}  // namespace shardproof::planner::transformer
