// The checks of one graph that follow reading it (plan_validation.h,
// read_graph): SSA, placement on ranks, acyclicity and the topological order.
#include <algorithm>
#include <queue>
#include <string>
#include <vector>

#include "engine/format/v1/plan_validation.h"

namespace shardproof::plan_detail {
namespace {

// Every op left unsorted has an unsorted producer: walking back from one
// must come round to an op already seen.
[[noreturn]] void report_cycle(const Graph& g, const GraphSyntax& syn,
                               const std::vector<int>& pending) {
  int start = static_cast<int>(
      std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; }) - pending.begin());
  std::vector<int> path;
  std::vector<int> seen_at(g.ops.size(), -1);
  int cur = start;
  while (seen_at[cur] < 0) {
    seen_at[cur] = static_cast<int>(path.size());
    path.push_back(cur);
    for (int t : g.ops[cur].in) {
      int p = g.producer[t];
      if (p >= 0 && pending[p] > 0) {
        cur = p;
        break;
      }
    }
  }
  // path[seen_at[cur]..] walks the cycle backwards; print it forwards.
  std::vector<int> cycle(path.begin() + seen_at[cur], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  std::string text;
  for (size_t k = 0; k < cycle.size(); ++k) {
    const Op& a = g.ops[cycle[k]];
    const Op& b = g.ops[cycle[(k + 1) % cycle.size()]];
    std::string via;
    for (int t : b.in)
      if (g.producer[t] == a.index) via = g.tensors[t].name;
    text += (k ? "" : quoted(a.display_name())) + " --" + via + "--> " + quoted(b.display_name());
  }
  syn.ops[cycle[0]].fail("cycle", std::string(graph_name(g)) + " has a cycle: " + text);
}

}  // namespace

const char* graph_name(const Graph& g) {
  return g.parallel ? "the parallel graph" : "the logical graph";
}

// Every tensor is a graph input or the out of exactly one op, never both.
void check_ssa(Graph& g, const GraphSyntax& syn) {
  g.producer.assign(g.tensors.size(), -1);
  std::vector<bool> is_input(g.tensors.size(), false);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    int t = g.inputs[i];
    if (is_input[t])
      syn.inputs->item(i).fail(
          "ssa", "tensor " + quoted(g.tensors[t].name) + " is listed twice in inputs");
    is_input[t] = true;
  }
  for (const Op& op : g.ops) {
    auto out = [&](size_t j) { return syn.ops[op.index].get("out")->item(j); };
    for (size_t j = 0; j < op.out.size(); ++j) {
      int t = op.out[j];
      auto tn = [&] { return quoted(g.tensors[t].name); };
      if (is_input[t])
        out(j).fail("ssa", "tensor " + tn() + " is a graph input and also the output of op " +
                               op.display_name());
      if (g.producer[t] >= 0)
        out(j).fail("ssa", "tensor " + tn() + " is already the output of op " +
                               g.ops[g.producer[t]].display_name() +
                               "; every tensor has exactly one producer");
      g.producer[t] = op.index;
    }
  }
  for (size_t t = 0; t < g.tensors.size(); ++t)
    if (!is_input[t] && g.producer[t] < 0)
      syn.tensor_decls[t].fail("dangling-tensor",
                               "tensor " + quoted(g.tensors[t].name) +
                                   " is declared but is neither an input nor any op's output");
}

// A non-collective op runs on one rank: all its tensors live there.
void place_local(const Graph& g, Op& op, const Node& n) {
  int first = op.in.empty() ? op.out[0] : op.in[0];
  int rank = g.tensors[first].rank;
  auto check = [&](const std::vector<int>& ts, const char* key) {
    for (size_t j = 0; j < ts.size(); ++j) {
      const TensorDecl& t = g.tensors[ts[j]];
      if (t.rank != rank)
        n.get(key)->item(j).fail(
            "placement", "op " + op.display_name() + " (" + op.op +
                             ") is not a collective, so all its tensors live on one rank; " +
                             quoted(t.name) + " is on rank " + std::to_string(t.rank) + " but " +
                             quoted(g.tensors[first].name) + " is on rank " + std::to_string(rank));
    }
  };
  check(op.in, "in");
  check(op.out, "out");
  if (op.rank >= 0 && op.rank != rank)
    n.get("rank")->fail("placement", "op " + op.display_name() + " says rank " +
                                         std::to_string(op.rank) + " but its tensors are on rank " +
                                         std::to_string(rank));
  op.rank = rank;
}

// The i-th input and output live on group[i]; send moves group[0] -> group[1].
void place_collective(const Graph& g, const Op& op, const Node& n) {
  auto what = [&] { return "collective " + op.display_name() + " (" + op.op + ")"; };
  const size_t ranks = op.group.size();
  bool send = op.op == "send";
  if (send && (ranks != 2 || op.in.size() != 1 || op.out.size() != 1))
    n.fail("group",
           what() + ": send needs group [src, dst], one input and one output; found a group of " +
               std::to_string(ranks) + ", " + std::to_string(op.in.size()) + " input(s), " +
               std::to_string(op.out.size()) + " output(s)");
  if (!send && (op.in.size() != ranks || op.out.size() != ranks))
    n.fail("group", what() + ": needs one input and one output per group rank (" +
                        std::to_string(ranks) + "); found " + std::to_string(op.in.size()) +
                        " input(s) and " + std::to_string(op.out.size()) + " output(s)");
  auto check = [&](const std::vector<int>& ts, const char* key, size_t offset) {
    for (size_t j = 0; j < ts.size(); ++j) {
      const TensorDecl& t = g.tensors[ts[j]];
      int want = op.group[j + offset];
      if (t.rank != want)
        n.get(key)->item(j).fail(
            "placement", what() + ": " + key + "[" + std::to_string(j) + "] must live on rank " +
                             std::to_string(want) + " (group[" + std::to_string(j + offset) +
                             "]); " + quoted(t.name) + " is on rank " + std::to_string(t.rank));
    }
  };
  check(op.in, "in", 0);
  check(op.out, "out", send ? 1 : 0);
}

// Kahn's algorithm, always taking the ready op that comes first in the plan.
void sort_topologically(Graph& g, const GraphSyntax& syn) {
  size_t n = g.ops.size();
  std::vector<std::vector<int>> users(n);
  std::vector<int> pending(n, 0);
  std::vector<int> deps;  // the op's producers, each once, in index order
  for (const Op& op : g.ops) {
    deps.clear();
    for (int t : op.in)
      if (g.producer[t] >= 0) deps.push_back(g.producer[t]);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    pending[op.index] = static_cast<int>(deps.size());
    for (int d : deps) users[d].push_back(op.index);
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(static_cast<int>(i));
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    g.topo_order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push(u);
  }
  if (g.topo_order.size() != n) report_cycle(g, syn, pending);
  g.topo_rank.assign(n, 0);
  for (size_t r = 0; r < g.topo_order.size(); ++r)
    g.topo_rank[g.topo_order[r]] = static_cast<int>(r);
}

}  // namespace shardproof::plan_detail
