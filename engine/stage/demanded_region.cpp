#include "engine/stage/demanded_region.h"
#include "engine/stage/boxes.h"

#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace shardproof {
namespace {

using Box = SliceSpec;

// Bounding box of two demands on the same tensor.
void unite(std::map<int, Box>& demand, int tensor, const Box& box) {
  if (empty_box(box)) return;
  auto [it, inserted] = demand.emplace(tensor, box);
  if (inserted) return;
  for (size_t d = 0; d < box.size(); ++d) {
    it->second[d].first = std::min(it->second[d].first, box[d].first);
    it->second[d].second = std::max(it->second[d].second, box[d].second);
  }
}

int64_t attr_int(const AttrMap& attrs, const char* name, int64_t fallback) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second.is_int() ? it->second.as_int() : fallback;
}

bool attr_bool(const AttrMap& attrs, const char* name) {
  auto it = attrs.find(name);
  return it != attrs.end() && it->second.kind == Attr::Kind::Bool && it->second.boolean;
}

int norm_dim(int64_t d, size_t rank) {
  return static_cast<int>(d < 0 ? d + static_cast<int64_t>(rank) : d);
}

// NumPy broadcasting: input dims right-aligned with the output's; a size-1
// input dim under a larger output dim reads its one element.
Box broadcast_in(const Shape& in, const Shape& out, const Box& r) {
  Box box;
  const size_t shift = out.size() - in.size();
  for (size_t j = 0; j < in.size(); ++j) {
    if (in[j] == 1 && out[j + shift] != 1)
      box.push_back({0, 1});
    else
      box.push_back(r[j + shift]);
  }
  return box;
}

bool elementwise(const std::string& op) {
  static const std::set<std::string> names = {
      "add", "sub",    "mul",        "div",   "maximum", "minimum", "neg",   "exp",
      "log", "sqrt",   "rsqrt",      "tanh",  "sigmoid", "relu",    "gelu",  "silu",
      "erf", "square", "reciprocal", "scale", "pow",     "map",     "where", "eq",
      "lt",  "le",     "gt",         "ge",    "cast",    "expand",  "sgd",   "adam"};
  return names.count(op) > 0;
}

// An op as the demand rules read it: operator, attributes, operand shapes.
struct OpView {
  const std::string& name;
  const AttrMap& attrs;
  std::vector<Shape> in, out;
};

OpView view_of(const Graph& g, const Op& op) {
  OpView v{op.op, op.attrs, {}, {}};
  for (int t : op.in) v.in.push_back(g.tensors[t].shape);
  for (int t : op.out) v.out.push_back(g.tensors[t].shape);
  return v;
}

// Demand on input `k` of `op` given the (union) demand `r` on its first
// output (all outputs of a multi-output op share one shape except split).
Box input_demand(const OpView& op, size_t k, const Box& r, const std::vector<Box>& out_demand) {
  const Shape& in = op.in[k];
  const Shape& out = op.out[0];
  const std::string& name = op.name;
  if (elementwise(name)) return in.size() <= out.size() ? broadcast_in(in, out, r) : whole_box(in);
  if (name == "slice") {
    Box box = r;
    const int d = norm_dim(attr_int(op.attrs, "dim", 0), in.size());
    const int64_t start = attr_int(op.attrs, "start", 0);
    box[d] = {r[d].first + start, r[d].second + start};
    return box;
  }
  if (name == "concat") {
    const int d = norm_dim(attr_int(op.attrs, "dim", 0), out.size());
    int64_t offset = 0;
    for (size_t j = 0; j < k; ++j) offset += op.in[j][d];
    Box box = r;
    box[d] = {std::max<int64_t>(r[d].first - offset, 0),
              std::min<int64_t>(r[d].second - offset, in[d])};
    return box;
  }
  if (name == "split") {
    const int d = norm_dim(attr_int(op.attrs, "dim", 0), in.size());
    Box box;
    int64_t offset = 0;
    for (size_t o = 0; o < op.out.size(); ++o) {
      const Box& ro = out_demand[o];
      if (!ro.empty() && !empty_box(ro)) {
        Box shifted = ro;
        shifted[d] = {ro[d].first + offset, ro[d].second + offset};
        if (box.empty()) {
          box = shifted;
        } else {
          for (size_t j = 0; j < box.size(); ++j)
            box[j] = {std::min(box[j].first, shifted[j].first),
                      std::max(box[j].second, shifted[j].second)};
        }
      }
      offset += op.out[o][d];
    }
    return box.empty() ? whole_box(in) : box;
  }
  if (name == "transpose") {
    auto it = op.attrs.find("perm");
    if (it == op.attrs.end() || !it->second.is_int_list()) return whole_box(in);
    const std::vector<int64_t> perm = it->second.as_int_list();
    Box box = whole_box(in);
    for (size_t i = 0; i < perm.size(); ++i) box[norm_dim(perm[i], in.size())] = r[i];
    return box;
  }
  if (name == "reshape") {
    // Trailing dimensions the reshape leaves alone keep their region.
    Box box = whole_box(in);
    for (size_t j = 1; j <= std::min(in.size(), out.size()); ++j) {
      if (in[in.size() - j] != out[out.size() - j]) break;
      // Only when every dim before it on both sides folds into one another.
      box[in.size() - j] = r[out.size() - j];
    }
    return box;
  }
  if (name == "sum" || name == "mean" || name == "max") {
    std::set<int> reduced;
    auto it = op.attrs.find("dims");
    if (it == op.attrs.end()) {
      for (size_t d = 0; d < in.size(); ++d) reduced.insert(static_cast<int>(d));
    } else {
      for (int64_t d : it->second.as_int_list()) reduced.insert(norm_dim(d, in.size()));
    }
    const bool keep = attr_bool(op.attrs, "keepdim");
    Box box;
    size_t o = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (reduced.count(static_cast<int>(d))) {
        box.push_back({0, in[d]});
        if (keep) ++o;
      } else {
        box.push_back(r[o++]);
      }
    }
    return box;
  }
  if (name == "softmax" || name == "log_softmax") {
    Box box = r;
    const int d = norm_dim(attr_int(op.attrs, "dim", -1), in.size());
    box[d] = {0, in[d]};
    return box;
  }
  if (name == "matmul" && in.size() >= 2 && out.size() >= 2) {
    const bool ta = attr_bool(op.attrs, "transpose_a"), tb = attr_bool(op.attrs, "transpose_b");
    const size_t rank = in.size();
    // Batch dims broadcast like elementwise operands.
    Shape out_batch(out.begin(), out.end() - 2), in_batch(in.begin(), in.end() - 2);
    Box r_batch(r.begin(), r.end() - 2);
    Box box = in_batch.size() <= out_batch.size() ? broadcast_in(in_batch, out_batch, r_batch)
                                                  : whole_box(in_batch);
    box.push_back({0, in[rank - 2]});
    box.push_back({0, in[rank - 1]});
    const auto rows = r[out.size() - 2], cols = r[out.size() - 1];
    if (k == 0)
      box[ta ? rank - 1 : rank - 2] = rows;
    else
      box[tb ? rank - 2 : rank - 1] = cols;
    return box;
  }
  return whole_box(in);
}

}  // namespace

SliceSpec operand_demand(const Graph& g, int op_index, size_t k, const SliceSpec& region) {
  return input_demand(view_of(g, g.ops[op_index]), k, region, {region});
}

SliceSpec operand_demand(const std::string& op, const AttrMap& attrs, const std::vector<Shape>& in,
                         const std::vector<Shape>& out, size_t k, const SliceSpec& region) {
  return input_demand(OpView{op, attrs, in, out}, k, region, {region});
}

namespace {

// One op of a walk in reverse topological order: when an output of `op` is
// demanded, adds what it demands of each input to `demand` and says so.
bool propagate(const Graph& g, int op_index, std::map<int, Box>& demand) {
  const Op& op = g.ops[op_index];
  std::vector<Box> out_demand;
  Box first;
  bool any = false;
  for (int t : op.out) {
    auto d = demand.find(t);
    out_demand.push_back(d == demand.end() ? Box{} : d->second);
    if (d == demand.end()) continue;
    any = true;
    // Outputs of one op share a shape (except split, handled per output).
    if (first.empty() || op.op == "split") first = d->second;
  }
  if (!any) return false;
  if (op.op != "split" && op.out.size() > 1) {
    // Same-shaped outputs (an optimizer step): the union of their demands.
    std::map<int, Box> joint;
    for (const Box& d : out_demand)
      if (!d.empty()) unite(joint, 0, d);
    first = joint.count(0) ? joint[0] : whole_box(g.tensors[op.out[0]].shape);
  }
  const OpView view = view_of(g, op);
  for (size_t k = 0; k < op.in.size(); ++k)
    unite(demand, op.in[k], input_demand(view, k, first, out_demand));
  return true;
}

}  // namespace

std::vector<int> demanded_cone(const Graph& g, const std::vector<std::pair<int, SliceSpec>>& seeds,
                               const std::function<bool(int)>& stop) {
  std::map<int, Box> demand;
  // Ops by topological rank, latest first: every consumer of an op's
  // outputs ranks after it, so its demand is complete when it is taken.
  std::priority_queue<std::pair<int, int>> queue;
  std::unordered_set<int> queued;
  std::unordered_set<int> seed_tensors;
  for (const auto& seed : seeds) seed_tensors.insert(seed.first);
  auto reach = [&](int tensor) {
    if (!demand.count(tensor) || (!seed_tensors.count(tensor) && stop(tensor))) return;
    const int producer = g.producer[tensor];
    if (producer >= 0 && queued.insert(producer).second)
      queue.push({g.topo_rank[producer], producer});
  };
  for (const auto& [tensor, region] : seeds)
    unite(demand, tensor, region.empty() ? whole_box(g.tensors[tensor].shape) : region);
  for (const auto& seed : seeds) reach(seed.first);
  std::vector<int> kept;
  while (!queue.empty()) {
    const int op = queue.top().second;
    queue.pop();
    if (!propagate(g, op, demand)) continue;
    kept.push_back(op);
    for (int in : g.ops[op].in) reach(in);
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

Contraction contraction_producing(const Graph& log, int t) {
  const Op& op = log.ops[log.producer[t]];
  std::vector<Shape> shapes;
  for (int in : op.in) shapes.push_back(log.tensors[in].shape);
  Contraction c;
  if (std::string e = contraction_of(op.op, op.attrs, shapes, c); !e.empty())
    throw std::logic_error("restricted claim on " + log.tensors[t].name + ": " + e);
  return c;
}

}  // namespace shardproof
