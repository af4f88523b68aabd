// The MoE bug catalogue (expert parallelism, expert tensor parallelism,
// router and shared expert, sequence and context parallelism), the hooks
// the MoE builder asks at the one site each bug corrupts (dp rank 0, cp
// rank 0, micro-batch 0, the MoE reference layer), and which catalogue bugs
// a model family can carry.

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string needs(bool ok, const std::string& why) {
  return ok ? "" : "needs " + why;
}

bool has_moe_layer(const Layout& s) {
  return s.moe() && s.moe_bug_layer() < s.L;
}

std::string needs_moe(const Layout& s, bool ok, const std::string& why) {
  if (!has_moe_layer(s)) return "needs an MoE layer";
  return needs(ok, why);
}

std::string in_moe(const Layout& s, const std::string& what) {
  return layer(s.moe_bug_layer()) + ".moe." + what;
}

// "tp >= 2", or under --etp below tp "etp >= 2": what the expert ffn is split over.
std::string etp_text(const Layout& s, const std::string& what) {
  return (s.etp_split() ? "etp " : "tp ") + what;
}

// An expert block with replicas to sum: ep < dp (ep = 1: every dp rank), or
// under --etp below tp an edp group of two or more.
std::string needs_edp_replicas(const Layout& s) {
  if (s.etp_split()) return needs_moe(s, s.edp() >= 2, "edp = dp * tp / (etp * ep) >= 2");
  return needs_moe(s, s.dp >= 2 && s.ep < s.dp, "dp >= 2 and ep < dp");
}

}  // namespace

const std::vector<BugSpec>& moe_bug_table() {
  static const std::vector<BugSpec> bugs = {
      {{"expert-out-not-reduced-tp",
        "the experts' down projection partial sums (ffn split over tp) are not all-reduced over "
        "tp in the MoE reference layer: each rank combines its own part",
        "missing all-reduce after a row-parallel expert linear (expert tensor parallelism)"},
       [](const Layout& s) { return needs_moe(s, s.etp >= 2, etp_text(s, ">= 2")); },
       [](const Layout& s) { return in_moe(s, "out"); }},
      {{"expert-grad-not-reduced-tp",
        "the gradient of the experts' input (tp partials of the gate/up backward) is not "
        "all-reduced over tp in the MoE reference layer",
        "missing all-reduce in the backward of a column-parallel expert linear"},
       [](const Layout& s) { return needs_moe(s, s.etp >= 2, etp_text(s, ">= 2")); },
       [](const Layout& s) { return grad(in_moe(s, "xin")); }},
      {{"router-grad-not-synced",
        "the router weight is treated as expert-local: its gradient is never all-reduced over dp "
        "(tp rank 0)",
        "replicated MoE parameter (router/gate) left out of the data-parallel gradient sync"},
       [](const Layout& s) { return needs_moe(s, s.dp >= 2, "dp >= 2"); },
       [](const Layout& s) { return grad(in_moe(s, "wr")); }},
      {{"expert-grad-not-synced",
        "with ep < dp every expert block has dp / ep replicas (every dp rank at ep = 1), but the "
        "reference layer's expert gate weight gradient is not all-reduced over its "
        "expert-data-parallel group (tp rank 0)",
        "expert parameters skipped by the (expert-)data-parallel gradient sync"},
       [](const Layout& s) { return needs_edp_replicas(s); },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"expert-grad-double-reduced",
        "with ep = dp each dp rank owns other experts, yet the expert gate weight gradients are "
        "all-reduced over dp as if replicated: each owner steps with the sum of all blocks",
        "expert gradients all-reduced over the data-parallel group instead of the "
        "expert-data-parallel group"},
       [](const Layout& s) {
         return needs_moe(s, s.ep >= 2 && s.ep == s.dp && s.zero == 0, "ep = dp >= 2, zero 0");
       },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"expert-grad-on-dp-group",
        "with 1 < ep < dp the expert gate weight gradients are all-reduced over the whole dp group "
        "instead of their expert-data-parallel group (dp / ep replicas of one block): each block "
        "is summed with the other ep ranks' blocks",
        "collective on a wrong process group (data-parallel where expert-data-parallel is due)"},
       [](const Layout& s) {
         return needs_moe(s, s.ep >= 2 && s.ep < s.dp && s.zero == 0, "1 < ep < dp, zero 0");
       },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"shared-expert-grad-on-edp-group",
        "with 1 < ep < dp the shared expert's gate weight (a dense parameter, replicated over "
        "every dp rank) is synced like an expert: all-reduced over the expert-data-parallel "
        "group only",
        "collective on a wrong process group (expert-data-parallel where data-parallel is due: "
        "a dense parameter marked as an expert parameter)"},
       [](const Layout& s) {
         return needs_moe(s, s.ep >= 2 && s.ep < s.dp && s.zero == 0, "1 < ep < dp, zero 0");
       },
       [](const Layout& s) { return grad(in_moe(s, "wsg")); }},
      {{"expert-grad-averaged-over-edp",
        "the expert gate weight gradients are averaged over their expert-data-parallel group "
        "(dp / ep replicas) where the loss, normalised over every token, needs their sum (tp "
        "rank 0)",
        "expert gradients scaled by the expert-data-parallel size"},
       [](const Layout& s) { return needs_edp_replicas(s); },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"zero-expert-shard-dp-rank",
        "with ZeRO-1 and 1 < ep < dp every rank keeps the shard of the reference layer's summed "
        "expert gate weight gradient at its dp rank's place (d mod edp) instead of its place in "
        "its expert-data-parallel group (d / ep) (tp rank 0)",
        "distributed optimizer shards expert parameters by the data-parallel rank where the "
        "expert-data-parallel rank is due"},
       [](const Layout& s) {
         return needs_moe(s, s.zero == 1 && s.ep >= 2 && s.ep < s.dp, "zero 1 and 1 < ep < dp");
       },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"all-to-all-dims-swapped",
        "the dispatch all_to_all (tp rank 0, micro-batch 0) splits on sequences and concatenates "
        "on experts, into a buffer then viewed with the expected shape",
        "all_to_all with split_dim and concat_dim swapped"},
       [](const Layout& s) {
         return needs_moe(s, s.ep >= 2 && s.local_batch() / s.etp_splits() % s.ep == 0,
                          "ep >= 2 and ep dividing the sequences per dp rank and micro-batch");
       },
       [](const Layout& s) { return in_moe(s, "xin"); }},
      {{"all-to-all-wrong-order",
        "the combine all_to_all (tp rank 0, micro-batch 0) lists its group in reverse: each rank "
        "gets another rank's tokens back, experts in reverse order",
        "all_to_all with the wrong rank order (expert outputs returned to the wrong tokens)"},
       [](const Layout& s) { return needs_moe(s, s.ep >= 2, "ep >= 2"); },
       [](const Layout& s) { return in_moe(s, "out"); }},
      {{"moe-combine-missing-shared",
        "the MoE output of the reference layer masks out the shared expert (its output times 0; dp "
        "rank 0, micro-batch 0)",
        "shared expert output dropped from the MoE combine"},
       [](const Layout& s) { return needs_moe(s, true, ""); },
       [](const Layout& s) { return layer(s.moe_bug_layer()) + ".mlp"; }},
      {{"expert-grad-scaled-by-dp",
        "with ep >= 2 the expert gate weight gradients of the MoE reference layer are divided by "
        "dp, as if averaged over the data-parallel group, although a block's replicas are its "
        "expert-data-parallel group only (dp / ep ranks: one owner at ep = dp) and the loss, "
        "normalised over every token, needs their sum",
        "expert gradients scaled by the data-parallel size instead of the expert-data-parallel "
        "size"},
       [](const Layout& s) { return needs_moe(s, s.ep >= 2, "ep >= 2"); },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"moe-sp-dispatch-local-tokens",
        "under sequence parallelism the MoE reference layer routes the tokens a rank holds (its "
        "sequence piece) as if they were whole sequences, without the all-gather over tp: the "
        "other tokens' slots stay empty and capacity counts only the piece (dp rank 0, micro-batch "
        "0)",
        "MoE dispatch on the sequence-parallel shard (routing groups and capacity cut by sp)"},
       [](const Layout& s) { return needs_moe(s, s.sp, "--sp"); },
       [](const Layout& s) { return in_moe(s, "xin.flat"); }},
      {{"moe-sp-combine-wrong-piece",
        "under sequence parallelism each rank keeps the next tp rank's sequence piece of the MoE "
        "reference layer's combined output (dp rank 0, micro-batch 0)",
        "MoE output scattered to the wrong sequence-parallel rank"},
       [](const Layout& s) { return needs_moe(s, s.sp, "--sp"); },
       [](const Layout& s) { return in_moe(s, "y"); }},
      {{"moe-cp-dispatch-local-chunk",
        "under context parallelism the MoE reference layer routes the rank's own chunk as if it "
        "were whole sequences, without the all-gather over cp: the other chunks' slots stay empty "
        "(dp and cp rank 0, micro-batch 0)",
        "MoE dispatch on the context-parallel chunk (routing groups and capacity cut by cp)"},
       [](const Layout& s) { return needs_moe(s, s.cp >= 2, "cp >= 2"); },
       [](const Layout& s) { return in_moe(s, "xin.flat"); }},
      {{"moe-cp-combine-wrong-chunk",
        "under context parallelism cp rank 0 keeps the next cp rank's chunk of the MoE reference "
        "layer's combined output (dp rank 0, micro-batch 0)",
        "MoE output sliced to the wrong context-parallel chunk"},
       [](const Layout& s) { return needs_moe(s, s.cp >= 2, "cp >= 2"); },
       [](const Layout& s) { return in_moe(s, "y"); }},
      {{"moe-cp-expert-grad-all-slots",
        "under context parallelism every cp rank computes every slot of the whole sequences, and "
        "cp rank 0 contracts all of them (not its block) into the expert gate weight gradient, "
        "which the dp x cp sync then sums with the other ranks' blocks",
        "weight gradient of work replicated over context-parallel ranks counted more than once"},
       [](const Layout& s) { return needs_moe(s, s.cp >= 2, "cp >= 2"); },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
      {{"clip-norm-missing-ep",
        "with --clip the experts' sum of squares is all-reduced without the other ranks of the "
        "ep group, which hold other experts",
        "expert-parallel group left out of the gradient norm reduction"},
       [](const Layout& s) { return needs_moe(s, s.c.clip && s.ep >= 2, "--clip and ep >= 2"); },
       [](const Layout&) { return std::string("clip.expert.ss"); }},
  };
  return bugs;
}

std::vector<const BugSpec*> all_bugs() {
  std::vector<const BugSpec*> all;
  for (const auto* table : {&bug_table(), &option_bug_table(), &step_bug_table(), &moe_bug_table(),
                            &moe_etp_bug_table()})
    for (const BugSpec& b : *table) all.push_back(&b);
  return all;
}

std::vector<BugInfo> family_bugs(const ModelShape& model) {
  std::vector<BugInfo> infos;
  const bool moe = model.experts > 0;
  // What each bug needs is why the default configuration refuses it.
  const Layout defaults(model, PlanConfig{});
  auto list = [&](const BugSpec& b) {
    std::string why = b.not_applicable(defaults);
    if (why.empty()) why = family_not_applicable(defaults, b.info.name);
    infos.push_back(with_needs(b.info, why));
  };
  for (const BugSpec& b : bug_table()) {
    // tp > kv heads needs a tp dividing the heads: only when heads > kv heads.
    if (b.info.name == "kv-heads-not-replicated" && model.heads <= model.kv_heads) continue;
    list(b);
  }
  for (const BugSpec& b : option_bug_table()) list(b);
  for (const BugSpec& b : step_bug_table())
    // Dropout is refused on MoE models; their rank's rows are strided, so
    // the accumulated partial sum is not one block (accumulate-across-reduce).
    if (!moe ||
        (b.info.name.rfind("dropout-", 0) != 0 && b.info.name != "accumulate-across-reduce"))
      list(b);
  if (moe) {
    for (const BugSpec& b : moe_bug_table()) list(b);
    for (const BugSpec& b : moe_etp_bug_table()) list(b);
  }
  return infos;
}

std::string family_not_applicable(const Layout& s, const std::string& bug) {
  if (!s.moe()) return "";
  // Written for the expert mesh that re-factors dp only (etp == tp); under
  // --etp below tp etp-expert-grad-on-dp-group is the wrong-group bug.
  if (s.etp_split())
    for (const char* dp_mesh : {"expert-grad-double-reduced", "expert-grad-on-dp-group",
                                "shared-expert-grad-on-edp-group", "expert-grad-scaled-by-dp",
                                "zero-expert-shard-dp-rank"})
      if (bug == dp_mesh) return "written for etp = tp only, not for --etp below tp";
  if ((bug == "fused-gate-up-contiguous" || bug == "allreduce-mean-not-sum") &&
      s.moe_layer(s.bug_layer()))
    return "the reference layer " + layer(s.bug_layer()) + " is an MoE layer (no dense MLP)";
  if (bug == "pp-stage-layers-swapped") {
    const int a = s.stage_begin(s.last_stage());
    if (a + 1 < s.L && s.moe_layer(a) != s.moe_layer(a + 1))
      return "the last stage's first two layers are one dense, one MoE";
  }
  return "";
}

// --- the builder's hooks

bool Builder::moe_fires(const char* bug, int i, const Coord& x) const {
  return s.bug(bug) && (i < 0 || i == s.moe_bug_layer()) && x.d == 0 && x.c == 0 && x.m == 0;
}

Builder::BugSite Builder::moe_site(const char* bug, int i, const Coord& x) const {
  // moe_fires' coordinates are site_at's.
  if (!s.bug(bug) || (i >= 0 && i != s.moe_bug_layer())) return {};
  return site_at(x);
}

std::pair<std::string, Builder::BugSite> Builder::moe_tp_sum_bug(const std::string& site,
                                                                 const Coord& x) const {
  if (!s.moe()) return {"", {}};
  const std::string ref = layer(s.moe_bug_layer()) + ".moe";
  if (site == ref + ".out") return {"skip", moe_site("expert-out-not-reduced-tp", -1, x)};
  if (site == grad(ref + ".xin")) return {"skip", moe_site("expert-grad-not-reduced-tp", -1, x)};
  return {"", {}};
}

std::pair<std::string, Builder::BugSite> Builder::moe_dp_sync_bug(const Param& p,
                                                                  const Coord& x) const {
  if (!s.moe()) return {"", {}};
  // x is the group's first member (dp 0) on tp rank 0.
  const std::string ref = layer(s.moe_bug_layer()) + ".moe";
  if ((s.bug("router-grad-not-synced") && p.local == ref + ".wr") ||
      (s.bug("expert-grad-not-synced") && p.local == ref + ".wg"))
    return {"skip", site_at(x, 0, true)};
  if (s.bug("expert-grad-averaged-over-edp") && p.local == ref + ".wg")
    return {"mean", site_at(x, 0, true)};
  return {"", {}};
}

namespace {

bool expert_piece(const Spec& spec) {
  return !spec.empty() && spec[0] == Ax::Expert;
}

}  // namespace

bool Builder::dp_replicated(const Param& p) const {
  // With ep >= 2 the expert dimension is split over each ep group: the dp
  // ranks of one ep group hold different experts (replicas only across ep
  // groups: edp_replicated). Under --etp below tp an expert block's replicas
  // are its edp group of the tp x dp re-factoring, whatever ep is.
  if (s.logical || (s.ep == 1 && !s.etp_split()) || !expert_piece(p.spec)) return true;
  return (s.bug("expert-grad-double-reduced") || s.bug("expert-grad-on-dp-group") ||
          s.bug("etp-expert-grad-on-dp-group")) &&
         p.local == layer(s.moe_bug_layer()) + ".moe.wg";
}

bool Builder::edp_replicated(const Param& p) const {
  if (s.logical || !expert_piece(p.spec) || dp_replicated(p)) return false;
  // Under cp the cp ranks hold partial sums of one block too.
  if (s.etp_split()) return s.edp() > 1 || s.cp > 1;
  // Under cp the cp ranks hold partial sums of one block too.
  return s.ep > 1 && (s.ep < s.dp || s.cp > 1);
}

bool Builder::synced_over_edp(const Param& p) const {
  // Bug: the shared expert (dense) synced over the edp group, as an expert.
  const bool shared_bug =
      s.bug("shared-expert-grad-on-edp-group") && p.local == layer(s.moe_bug_layer()) + ".moe.wsg";
  return edp_replicated(p) || shared_bug;
}

Group Builder::edp_group() const {
  std::vector<std::string> axes = mesh().edp_axes();
  if (s.cp > 1) axes.push_back("cp");
  return Group::along(axes);
}

std::vector<Coord> Builder::sync_members(const Param& p, const Coord& x) const {
  std::vector<Coord> members;
  if (!synced_over_edp(p)) return x.d == 0 && x.c == 0 ? dp_cp_members(x) : members;
  if (s.etp_split()) {
    // The edp x cp group x leads: the expert-dp indices with x's ep rank,
    // with x's etp rank, every cp rank.
    if (expert_dp(x) >= s.ep || x.c != 0) return members;
    for (int q = expert_dp(x); q < s.dp * s.etp_splits(); q += s.ep)
      for (Coord xd = expert_coord(x, q); xd.c < s.cp; ++xd.c) members.push_back(xd);
    return members;
  }
  // The edp x cp group x leads: the dp ranks with x's ep rank, every cp rank.
  if (int(x.d) >= s.ep || x.c != 0) return members;
  for (Coord xd = x; int(xd.d) < s.dp; xd.d = Ix(int(xd.d) + s.ep))
    for (xd.c = 0; xd.c < s.cp; ++xd.c) members.push_back(xd);
  return members;
}

}  // namespace shardproof::planner::transformer
