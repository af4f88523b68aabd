// The transformer builder's plumbing: local names, the slice each local
// tensor claims, and the collectives over the mesh's groups. In the logical
// graph (every degree 1) names are the logical names, nothing is claimed and
// no collective is written.
#include <algorithm>
#include <stdexcept>

#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::string layer(int i) {
  return "l" + str(i);
}
std::string resid(int i) {
  return "x" + str(i);
}

namespace {

std::string stage_text(int p) {
  return p == kEveryStage ? Ix::axis("pp").text() : str(p);
}

}  // namespace

std::string Builder::at_rank(const Coord& x, const std::string& name) const {
  if (s.logical) return name;
  std::string prefix = "dp" + x.d.text();
  if (s.cp > 1) prefix += ".cp" + x.c.text();
  return prefix + ".tp" + x.t.text() + ".pp" + stage_text(x.p) + "." + name;
}

std::string Builder::at(const Coord& x, const std::string& name) const {
  if (s.logical) return name;
  std::string prefix = "dp" + x.d.text();
  if (s.cp > 1) prefix += ".cp" + x.c.text();
  return prefix + ".tp" + x.t.text() + ".pp" + stage_text(x.p) + ".mb" + x.m.text() + "." + name;
}

std::vector<Coord> Builder::devices(int p) const {
  if (sym()) return {Coord{dp_coord(), s.cp > 1 ? Ix::axis("cp") : Ix(0), mesh().tp(), p, 0}};
  std::vector<Coord> out;
  for (int d = 0; d < s.dp; ++d)
    for (int c = 0; c < s.cp; ++c)
      for (int t = 0; t < s.tp; ++t) out.push_back(Coord{d, c, t, p, 0});
  return out;
}

std::vector<Ix> Builder::dp_ranks() const {
  if (sym()) return {dp_coord()};
  std::vector<Ix> out;
  for (int d = 0; d < s.dp; ++d) out.push_back(d);
  return out;
}

const CompactMesh& Builder::mesh() const {
  if (!mesh_) throw std::logic_error("transformer planner: the v1 plan has no compact mesh");
  return *mesh_;
}

Ix Builder::dp_coord() const {
  return mesh().dp();
}

// In the compact form the expert mesh's ranks are numbers over the mesh's
// axes (transformer_mesh.h); in v1, of x's expert-dp index (moe_etp.cpp).
Aff Builder::ep_rank(const Coord& x) const {
  if (!sym()) return expert_dp(x) % s.ep;
  return mesh().number(x, mesh().ep_axes());
}

Aff Builder::edp_rank(const Coord& x) const {
  if (!sym()) return expert_dp(x) / s.ep;
  return mesh().number(x, mesh().edp_axes());
}

int Builder::axis_size(const std::string& axis) const {
  if (axis == "mb") return s.mb;
  return mesh().size(axis);
}

std::vector<Ix> Builder::microbatches() const {
  if (sym()) return {Ix::axis("mb")};
  std::vector<Ix> out;
  for (int m = 0; m < s.mb; ++m) out.push_back(m);
  return out;
}

Aff Builder::kv_replica(const Coord& x) const {
  // The compact form has no replicated kv heads (compact_unsupported).
  return s.kv_replicas() == 1 ? Aff(0) : Aff(x.t % s.kv_replicas());
}

// MoE: micro-batch major, the sequences of one micro-batch over all dp ranks
// are contiguous (an expert all_to_all gathers exactly those). Otherwise rank
// major, as a data loader shards a global batch: a rank's gradient is then a
// partial sum over contiguous rows (partial_box).
Aff Builder::batch_block(const Coord& x) const {
  return s.moe() ? Aff(x.m) * s.dp + x.d : Aff(x.d) * s.mb + x.m;
}

SymSlice Builder::slice_of(const Coord& x, const Shape& full, const Spec& spec) const {
  if (spec.size() != full.size())
    throw std::logic_error("transformer planner: spec rank does not match the shape");
  SymSlice slice;
  auto block = [](int64_t n, int64_t pieces, const Aff& i) {
    if (n % pieces != 0) throw std::logic_error("transformer planner: uneven split");
    return SymRange{i * (n / pieces), i * (n / pieces) + n / pieces};
  };
  for (size_t k = 0; k < full.size(); ++k) {
    const int64_t n = full[k];
    switch (spec[k]) {
      case Ax::Full:
        slice.push_back({0, n});
        break;
      case Ax::Batch:
        slice.push_back(block(n, int64_t(s.dp) * s.mb, batch_block(x)));
        break;
      case Ax::Seq:
        slice.push_back(block(n, s.cp, x.c));
        break;
      case Ax::SeqSp:
        slice.push_back(s.sp ? block(n, int64_t(s.cp) * s.tp, Aff(x.c) * s.tp + x.t)
                             : block(n, s.cp, x.c));
        break;
      case Ax::Tp:
        slice.push_back(block(n, s.tp, x.t));
        break;
      case Ax::Kv:
        slice.push_back(s.tp > s.NKV ? block(n, s.NKV, int(x.t) / s.kv_replicas())
                                     : block(n, s.tp, x.t));
        break;
      case Ax::KvModulo:
        slice.push_back(block(n, s.NKV, int(x.t) % s.NKV));
        break;
      case Ax::TpGate:
        slice.push_back(block(n / 2, s.tp, x.t));
        break;
      case Ax::MbBatch:
        // Micro-batch major: the ep group's sequences of micro-batch m are
        // one block.
        slice.push_back(s.edp() == 1
                            ? block(n, s.mb, x.m)
                            : block(n, int64_t(s.mb) * s.edp(), Aff(x.m) * s.edp() + edp_rank(x)));
        break;
      case Ax::Expert:
        slice.push_back(block(n, s.ep, ep_rank(x)));
        break;
      case Ax::Etp:
        slice.push_back(s.etp_split() ? block(n, s.etp, etp_rank(x)) : block(n, s.tp, x.t));
        break;
      case Ax::EtpBatch:
        // etp < tp: split t / etp of the rank's Batch block.
        slice.push_back(block(n, int64_t(s.dp) * s.mb * s.etp_splits(),
                              batch_block(x) * s.etp_splits() + token_split(x)));
        break;
      case Ax::TpUp: {
        SymRange r = block(n / 2, s.tp, x.t);
        slice.push_back({r.first + n / 2, r.second + n / 2});
        break;
      }
    }
  }
  return slice;
}

std::string Builder::claim(const Coord& x, const std::string& local, const std::string& logical,
                           const Shape& full, const Spec& spec, Part part,
                           const std::string& dtype) {
  if (s.logical) {
    if (!g.has_tensor(logical)) g.tensor(x, logical, full, std::nullopt, dtype);
    return logical;
  }
  SymSlice slice = slice_of(x, full, spec);
  g.tensor(x, local, extent(slice), SymClaim{logical, slice, part.k, part.n}, dtype);
  return local;
}

std::string Builder::act(const Coord& x, const std::string& logical, const Shape& full,
                         const Spec& spec, Part part, const std::string& dtype) {
  return claim(x, at(x, logical), logical, full, spec, part, dtype);
}

std::string Builder::scratch(const Coord& x, const std::string& name, const Shape& shape,
                             const std::string& dtype) {
  std::string local = at(x, name);
  g.tensor(x, local, shape, std::nullopt, dtype);
  return local;
}

void Builder::op(const Coord& x, const std::string& name, const std::string& op,
                 std::vector<std::string> in, std::vector<std::string> out, nlohmann::json attrs) {
  g.op(at(x, name), op, std::move(in), std::move(out), std::move(attrs));
}

std::string Builder::constant(const Coord& x, const std::string& name, const Shape& shape,
                              nlohmann::json value, const std::string& dtype) {
  std::string local = scratch(x, name, shape, dtype);
  op(x, name + ".const", "const", {}, {local}, {{"value", std::move(value)}, {"shape", shape}});
  return local;
}

Group Builder::tp_group(const Coord& x) const {
  if (sym()) return Group::along(mesh().tp_axes());
  std::vector<int> group;
  for (int t = 0; t < s.tp; ++t) group.push_back(s.rank(x.d, x.c, t, x.p));
  return group;
}

Group Builder::solo_group(const Coord& x) const {
  return sym() ? Group::along({}) : Group{rank(x)};
}

Group Builder::cp_group(const Coord& x) const {
  if (sym()) return Group::along({"cp"});
  std::vector<int> group;
  for (int c = 0; c < s.cp; ++c) group.push_back(s.rank(x.d, c, x.t, x.p));
  return group;
}

Group Builder::dp_cp_group(const Coord& x) const {
  if (sym()) {
    // Members in dp rank order (the expert mesh's dp rank is dp*ep + ep).
    std::vector<std::string> axes = mesh().dp_axes();
    if (s.cp > 1) axes.push_back("cp");
    return Group::along(axes);
  }
  std::vector<int> group;
  for (int d = 0; d < s.dp; ++d)
    for (int c = 0; c < s.cp; ++c) group.push_back(s.rank(d, c, x.t, x.p));
  return group;
}

std::vector<Coord> Builder::dp_cp_members(const Coord& x) const {
  std::vector<Coord> members;
  for (Coord xd = x; xd.d < s.dp; ++xd.d)
    for (xd.c = 0; xd.c < s.cp; ++xd.c) members.push_back(xd);
  return members;
}

void Builder::collective(const std::string& name, const std::string& op,
                         std::vector<std::string> in, std::vector<std::string> out,
                         const Group& group, nlohmann::json attrs) {
  g.collective(name, op, std::move(in), std::move(out), group, std::move(attrs));
}

// In the compact form the tp rank is the axis: one pass writes every rank.
void Builder::each_tp(Coord x, const std::function<void(const Coord&)>& local) {
  if (sym()) {
    x.t = mesh().tp();
    local(x);
    return;
  }
  for (x.t = 0; x.t < s.tp; ++x.t) local(x);
}

void Builder::each_dp(Coord x, const std::function<void(const Coord&)>& local) {
  if (sym()) {
    x.d = dp_coord();
    local(x);
    return;
  }
  for (x.d = 0; x.d < s.dp; ++x.d) local(x);
}

std::vector<Ix> Builder::ep_leaders() const {
  // v1 only: the compact form writes one group (moe_all_to_all).
  // etp < tp: expert-dp indices (moe_etp.cpp).
  if (s.etp_split()) {
    std::vector<Ix> out;
    for (int q = 0; q < s.dp * s.etp_splits(); q += s.ep) out.push_back(q);
    return out;
  }
  std::vector<Ix> out;
  for (int d = 0; d < s.dp; d += s.ep) out.push_back(d);
  return out;
}

void Builder::each_ep(Coord x, const std::function<void(const Coord&)>& local) {
  if (sym()) return local(mesh().spanned(x, mesh().ep_axes()));
  if (s.etp_split()) {
    const int first = expert_dp(x);
    for (int q = first; q < first + s.ep; ++q) local(expert_coord(x, q));
    return;
  }
  const int first = int(x.d);
  for (x.d = first; x.d < first + s.ep; ++x.d) local(x);
}

Group Builder::ep_group(const Coord& x) const {
  // Compact: the ep axes of the expert mesh, or (ep == dp) the dp axis.
  if (sym()) return Group::along(mesh().ep_axes());
  std::vector<int> group;
  if (s.etp_split()) {
    const int first = expert_dp(x);
    for (int q = first; q < first + s.ep; ++q) group.push_back(rank(expert_coord(x, q)));
    return group;
  }
  for (int d = int(x.d); d < int(x.d) + s.ep; ++d) group.push_back(s.rank(d, x.c, x.t, x.p));
  return group;
}

void Builder::each_cp(Coord x, const std::function<void(const Coord&)>& local) {
  if (sym() && s.cp > 1) {
    x.c = Ix::axis("cp");
    local(x);
    return;
  }
  for (x.c = 0; x.c < s.cp; ++x.c) local(x);
}

void Builder::each_dp_cp(Coord x, const std::function<void(const Coord&)>& local) {
  each_dp(x, [&](const Coord& xd) { each_cp(xd, local); });
}

void Builder::each_cp_tp(Coord x, const std::function<void(const Coord&)>& local) {
  each_cp(x, [&](const Coord& xc) { each_tp(xc, local); });
}

void Builder::tp_sum(Coord x, const std::string& name, const Shape& full, Spec spec, int seq_dim,
                     const std::string& site,
                     const std::function<void(const Coord&, const std::string&)>& produce) {
  if (s.tp == 1) {
    each_tp(x, [&](const Coord& xt) { produce(xt, act(xt, name, full, spec)); });
    return;
  }
  std::vector<std::string> parts, outs;
  each_tp(x, [&](const Coord& xt) {
    std::string part = claim(xt, at(xt, name + ".part"), name, full, spec, Part{xt.t, s.tp});
    produce(xt, part);
    parts.push_back(part);
  });
  const bool scatter = s.sp && seq_dim >= 0;
  Spec out_spec = spec;
  if (scatter) out_spec[seq_dim] = Ax::SeqSp;
  each_tp(x, [&](const Coord& xt) { outs.push_back(act(xt, name, full, out_spec)); });

  x.t = 0;
  const std::string op_name = at(x, name + (scatter ? ".tp_reduce_scatter" : ".tp_all_reduce"));
  const auto hook = tp_sum_bug(site, x);
  branch(hook.second, [&](bool buggy) {
    const std::string kind = buggy ? hook.first : "";
    nlohmann::json attrs = {{"reduce", kind == "mean" ? "mean" : "sum"}};
    if (kind == "skip") {
      // Each rank goes on with its own part (a one-rank group per tp rank).
      each_tp(x, [&](const Coord& xt) {
        const size_t k = tp_index(xt);
        if (scatter) {
          const int64_t piece = g.shape(parts[k])[seq_dim] / s.tp;
          op(xt, name + ".sp_local_slice", "slice", {parts[k]}, {outs[k]},
             {{"dim", seq_dim},
              {"start", (Aff(xt.t) * piece).attr()},
              {"end", (Aff(xt.t) * piece + piece).attr()}});
        } else {
          collective(op_name + ".solo" + xt.t.text(), "all_reduce", {parts[k]}, {outs[k]},
                     solo_group(xt), attrs);
        }
      });
      return;
    }
    if (kind == "double" && !scatter) {
      // Reduced twice: the second all-reduce sums tp copies of the sum.
      std::vector<std::string> once;
      each_tp(x, [&](const Coord& xt) {
        once.push_back(scratch(xt, name + ".once", g.shape(outs[tp_index(xt)])));
      });
      collective(op_name + ".first", "all_reduce", parts, once, tp_group(x), attrs);
      collective(op_name, "all_reduce", once, outs, tp_group(x), attrs);
      return;
    }
    if (scatter) {
      attrs["dim"] = seq_dim;
      collective(op_name, "reduce_scatter", parts, outs, tp_group(x), attrs);
    } else {
      collective(op_name, "all_reduce", parts, outs, tp_group(x), attrs);
    }
  });
}

std::string Builder::gather_seq(const Coord& x, const std::string& name, const Shape&, Spec, int) {
  return s.sp ? at(x, name) + ".sp" : at(x, name);
}

void Builder::all_gather_seq_group(Coord x, const std::string& name, const Shape& full, Spec spec,
                                   int seq_dim) {
  if (!s.sp) return;
  std::vector<std::string> in, out;
  Spec gathered = spec;
  gathered[seq_dim] = Ax::Seq;
  each_tp(x, [&](const Coord& xt) {
    in.push_back(at(xt, name));
    out.push_back(claim(xt, at(xt, name) + ".sp", name, full, gathered));
  });
  x.t = 0;
  const auto hook = gather_bug(name, x);
  branch(hook.second, [&](bool buggy) {
    const std::string kind = buggy ? hook.first : "";
    std::vector<std::string> ins = in, outs = out;
    Group group = tp_group(x);
    if (kind == "order") {
      // Gathered in reverse rank order: every input and output keeps its rank
      // (v1 only: the compact form orders members by their coordinates).
      std::reverse(ins.begin(), ins.end());
      std::reverse(outs.begin(), outs.end());
      std::reverse(group.ranks.begin(), group.ranks.end());
    }
    if (kind == "dim") {
      // Gathered along the hidden dimension into a flat buffer, then viewed as
      // [batch, seq, hidden]: the rows of the ranks come out interleaved.
      std::vector<std::string> wide;
      each_tp(x, [&](const Coord& xt) {
        Shape w = g.shape(ins[tp_index(xt)]);
        w.back() *= s.tp;
        wide.push_back(scratch(xt, name + ".sp_wide", w));
      });
      collective(at(x, name + ".sp_all_gather"), "all_gather", ins, wide, group,
                 {{"dim", int(spec.size()) - 1}});
      each_tp(x, [&](const Coord& xt) {
        const size_t k = tp_index(xt);
        op(xt, name + ".sp_view", "reshape", {wide[k]}, {outs[k]}, {{"shape", g.shape(outs[k])}});
      });
      return;
    }
    collective(at(x, name + ".sp_all_gather"), "all_gather", ins, outs, group, {{"dim", seq_dim}});
  });
}

}  // namespace shardproof::planner::transformer
