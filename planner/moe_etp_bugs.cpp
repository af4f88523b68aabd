// The bugs of Megatron's expert mesh with expert tensor parallelism below
// tp (--etp, moe_etp.cpp): the token split of the tp ranks and the groups
// of the tp x dp re-factoring. Each fires at the MoE reference layer, dp
// rank 0, micro-batch 0, like the rest of the MoE catalogue (moe_bugs.cpp).
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string needs_split(const Layout& s, bool ok, const std::string& why) {
  if (!s.moe() || s.moe_bug_layer() >= s.L) return "needs an MoE layer";
  if (!s.etp_split()) return "needs --etp below tp";
  return ok ? "" : "needs " + why;
}

std::string in_moe(const Layout& s, const std::string& what) {
  return layer(s.moe_bug_layer()) + ".moe." + what;
}

}  // namespace

const std::vector<BugSpec>& moe_etp_bug_table() {
  static const std::vector<BugSpec> bugs = {
      {{"etp-tokens-not-split",
        "with etp below tp the tp ranks of dp rank 0 do not split their sequences before the "
        "expert all_to_all (micro-batch 0): every one sends the first of the tp / etp blocks, "
        "as if the tokens were replicated over tp, so the other blocks never reach the experts",
        "tokens replicated over tensor-parallel ranks dispatched to experts as if each rank held "
        "its own (expert tensor parallelism below tp)"},
       [](const Layout& s) { return needs_split(s, true, ""); },
       [](const Layout& s) { return in_moe(s, "xin"); }},
      {{"etp-split-gather-reversed",
        "with etp below tp the expert outputs that come back to dp rank 0 (micro-batch 0) are "
        "all-gathered over the tp ranks' token splits in reverse rank order",
        "all-gather of the token splits with the wrong rank order"},
       [](const Layout& s) { return needs_split(s, true, ""); },
       [](const Layout& s) { return in_moe(s, "out"); }},
      {{"etp-expert-grad-on-dp-group",
        "with etp below tp the expert gate weight gradients are all-reduced over the dense "
        "data-parallel group of each tp rank instead of the expert-data-parallel group of the "
        "tp x dp re-factoring (dp * tp / (etp * ep) ranks with the rank's ep and etp rank): "
        "blocks of other experts are summed in, or the other token splits' replicas left out",
        "expert gradients reduced over the data-parallel group where Megatron's expert "
        "data-parallel group (expert tensor parallelism below tp) is due"},
       [](const Layout& s) {
         // At ep = tp / etp the edp group is that dp group: nothing to find.
         return needs_split(s, s.dp >= 2 && s.ep != s.etp_splits() && s.zero == 0,
                            "dp >= 2, ep != tp / etp, zero 0");
       },
       [](const Layout& s) { return grad(in_moe(s, "wg")); }},
  };
  return bugs;
}

}  // namespace shardproof::planner::transformer
