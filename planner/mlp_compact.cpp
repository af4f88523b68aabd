// The parallel mlp graph in the compact form (shardproof-plan/1.1): one
// program per pipeline stage over the mesh (pp, dp, tp) with the micro-batch
// axis, each op written once. It denotes exactly the graph mlp_parallel.cpp
// writes rank by rank (same names, claims and groups), so the two verify
// alike; a bug limited to some ranks or micro-batches becomes an op or
// tensor with a `when`, beside the correct one limited to the rest.
#include <tuple>

#include "planner/compact_builder.h"
#include "planner/mlp.h"

namespace shardproof::planner::mlp {
namespace {

std::string n(int64_t v) {
  return std::to_string(v);
}

// A range of columns and its width.
struct Cols {
  ExprRange range;
  int64_t width;
};

class CompactMlp {
 public:
  CompactMlp(const Layout& layout, CompactBuilder& g) : s(layout), g(g) {}

  void build() {
    for (int p = 0; p < s.pp; ++p) stage(p);
  }

 private:
  // Names, as mlp_parallel.h writes them, with the coordinates as holes.
  static std::string at(const std::string& x) { return "dp{dp}.tp{tp}.pp{pp}.mb{mb}." + x; }
  static std::string at_mb(const std::string& m, const std::string& x) {
    return "dp{dp}.tp{tp}.pp{pp}.mb{" + m + "}." + x;
  }
  static std::string at_rank(const std::string& x) { return "dp{dp}.tp{tp}.pp{pp}." + x; }
  static std::string tp_op(const std::string& what) { return "dp{dp}.pp{pp}.mb{mb}." + what; }

  int64_t R() const { return s.mb_rows(); }
  int64_t W() const { return s.H / s.tp; }
  ExprRange rows() const {
    std::string lo = "dp*" + n(s.mb * R()) + " + mb*" + n(R());
    return {lo, lo + " + " + n(R())};
  }
  Cols cols(const std::string& t = "tp") const {
    std::string lo = "(" + t + ")*" + n(W());
    return {{lo, lo + " + " + n(W())}, W()};
  }
  Cols all() const { return {{0, s.H}, s.H}; }
  Cols local_cols(int layer) const { return s.kind(layer) == LayerKind::Row ? all() : cols(); }
  std::vector<ExprRange> weight_slice(int layer, const std::string& t = "tp") const {
    if (s.kind(layer) == LayerKind::Row) return {cols(t).range, all().range};
    return {all().range, cols(t).range};
  }
  std::vector<int64_t> weight_shape(int layer) const {
    if (s.kind(layer) == LayerKind::Row) return {W(), s.H};
    return {s.H, W()};
  }
  std::string parts_k() const { return "dp*" + n(s.mb) + " + mb"; }

  void act_tensor(const std::string& name, const std::string& logical, const Cols& c, Expr k = 0,
                  int64_t parts = 1, bool input = false) {
    g.tensor(
        {name, {R(), c.width}, ClaimTemplate{logical, {rows(), c.range}, k, parts}, "", input});
  }

  void stage(int p) {
    g.program("stage" + n(p), "pp == " + n(p));
    inputs(p);
    for (int i = s.stage_begin(p); i < s.stage_end(p); ++i) forward(i, p);
    if (p == s.last_stage()) loss();
    for (int i = s.stage_end(p) - 1; i >= s.stage_begin(p); --i) backward(i, p);
    for (int i = s.stage_begin(p); i < s.stage_end(p); ++i) update(i);
    if (p == s.last_stage()) reduce_loss();
  }

  void inputs(int p) {
    if (p == 0) act_tensor(at("x"), "x", all(), 0, 1, true);
    if (p == s.last_stage()) act_tensor(at("y"), "y", all(), 0, 1, true);
    for (int i = s.stage_begin(p); i < s.stage_end(p); ++i) {
      auto weight_tensor = [&](const std::string& t, const std::string& when) {
        g.tensor({at_rank(weight(i)), weight_shape(i), ClaimTemplate{weight(i), weight_slice(i, t)},
                  when, true});
      };
      // swapped-shards: tp ranks 0 and 1 of dp rank 0 load each other's
      // layer-0 shard.
      if (s.bug("swapped-shards") && i == 0) {
        Site site{{{"dp", 0, 0, s.dp}, {"tp", 0, 1, s.tp}}};
        for (const std::string& w : site.outside()) weight_tensor("tp", w);
        weight_tensor("1 - tp", site.inside());
      } else {
        weight_tensor("tp", "");
      }
      if (!s.adam()) continue;
      for (const std::string& st : {adam_m(i), adam_v(i)})
        g.tensor({at_rank(st), weight_shape(i), ClaimTemplate{st, weight_slice(i)}, "", true});
    }
  }

  // An all_reduce over tp; at `site` (if any) a bugged variant instead.
  void tp_all_reduce(const std::string& name, const std::string& in, const std::string& out,
                     const Site* site, bool mean, bool drop) {
    if (!site) {
      g.collective(name, "all_reduce", in, out, {"tp"}, {{"reduce", "sum"}});
      return;
    }
    for (const std::string& w : site->outside())
      g.collective(name, "all_reduce", in, out, {"tp"}, {{"reduce", "sum"}}, w);
    if (mean)
      g.collective(name, "all_reduce", in, out, {"tp"}, {{"reduce", "mean"}}, site->inside());
    if (drop)
      g.collective(name + ".tp{tp}", "all_reduce", in, out, {}, {{"reduce", "sum"}},
                   site->inside());
  }

  void forward(int i, int p) {
    const LayerKind kind = s.kind(i);
    const std::string l = "l" + n(i);
    if (i > 0 && i == s.stage_begin(p)) act_tensor(at(act(i - 1)), act(i - 1), local_cols(i - 1));
    std::string full = at(pre(i)), local = full;
    if (s.tp > 1 && kind == LayerKind::Row) local += ".part";
    if (s.tp > 1 && kind == LayerKind::ColumnGather) local += ".shard";
    if (kind == LayerKind::Row)
      act_tensor(local, pre(i), all(), "tp", s.tp);
    else
      act_tensor(local, pre(i), cols());
    g.op(at(l + ".fwd.matmul"), "matmul", {at(layer_input(i)), at_rank(weight(i))}, {local});
    if (s.tp > 1 && kind != LayerKind::Column) {
      act_tensor(full, pre(i), all());
      if (kind == LayerKind::ColumnGather) {
        g.collective(tp_op(l + ".fwd.tp_all_gather"), "all_gather", local, full, {"tp"},
                     {{"dim", -1}});
      } else {
        bool mean = i == 1 && s.bug("allreduce-mean-not-sum");
        bool drop = i == 1 && s.bug("drop-tp-allreduce");
        Site site{{{"dp", 0, 0, s.dp}, {"mb", 0, 0, s.mb}}};
        tp_all_reduce(tp_op(l + ".fwd.tp_all_reduce"), local, full, mean || drop ? &site : nullptr,
                      mean, drop);
      }
    }
    if (i + 1 < s.L) {
      act_tensor(at(act(i)), act(i), local_cols(i));
      g.op(at(l + ".fwd.gelu"), "gelu", {full}, {at(act(i))});
    }
    if (i + 1 == s.stage_end(p) && p != s.last_stage()) send_activation(i);
  }

  void send_activation(int i) {
    const std::string name = at(act(i) + ".send"), dst = at(act(i));
    const nlohmann::json to = {{"pp", 1}};
    bool wrong_tensor = s.bug("pp-send-wrong-tensor"), wrong_mb = s.bug("pp-send-wrong-microbatch");
    if (i != s.bug_boundary_layer() || !(wrong_tensor || wrong_mb)) {
      g.send(name, at(act(i)), dst, to);
      return;
    }
    Site site{{{"dp", 0, 0, s.dp}, {"tp", 0, 0, s.tp}, {"mb", 0, 0, s.mb}}};
    for (const std::string& w : site.outside()) g.send(name, at(act(i)), dst, to, w);
    g.send(name, wrong_tensor ? at(pre(i)) : at_mb("1", act(i)), dst, to, site.inside());
  }

  void loss() {
    const std::string out = pre(s.L - 1);
    int64_t count = s.bug("loss-scale-wrong-microbatch-count") ? s.mb_rows() * s.H : s.B * s.H;
    const int64_t parts = int64_t(s.dp) * s.mb;
    act_tensor(at("loss.diff"), "loss.diff", all());
    act_tensor(at("loss.sq"), "loss.sq", all());
    g.tensor({at("loss.sum"), {}});
    g.tensor({at("loss"),
              {},
              ClaimTemplate{"loss", {}, parts_k(), parts},
              "",
              false,
              s.dp == 1 && s.mb == 1});
    g.op(at("loss.fwd.sub"), "sub", {at(out), at("y")}, {at("loss.diff")});
    g.op(at("loss.fwd.square"), "square", {at("loss.diff")}, {at("loss.sq")});
    g.op(at("loss.fwd.sum"), "sum", {at("loss.sq")}, {at("loss.sum")});
    g.op(at("loss.fwd.scale"), "scale", {at("loss.sum")}, {at("loss")},
         {{"factor", fraction(1, count)}});
    act_tensor(at(grad(out)), grad(out), all());
    g.op(at("loss.bwd.scale"), "scale", {at("loss.diff")}, {at(grad(out))},
         {{"factor", fraction(2, count)}});
  }

  void backward(int i, int p) {
    const LayerKind kind = s.kind(i);
    const std::string l = "l" + n(i);
    std::string gp = at(grad(pre(i)));
    if (i + 1 == s.L) {
      if (s.tp > 1 && kind == LayerKind::ColumnGather) {
        gp += ".shard";
        act_tensor(gp, grad(pre(i)), cols());
        g.op(at(l + ".bwd.slice"), "slice", {at(grad(pre(i)))}, {gp},
             {{"dim", 1},
              {"start", {{"expr", "tp*" + n(W())}}},
              {"end", {{"expr", "tp*" + n(W()) + " + " + n(W())}}}});
      }
    } else {
      // grad(act(i)) comes from the next stage when layer i ends this one.
      if (i + 1 == s.stage_end(p)) act_tensor(at(grad(act(i))), grad(act(i)), local_cols(i));
      act_tensor(at(dgelu(i)), dgelu(i), local_cols(i));
      g.op(at(l + ".bwd.dgelu"), "map", {at(pre(i))}, {at(dgelu(i))}, {{"fn", "gelu'"}});
      act_tensor(gp, grad(pre(i)), local_cols(i));
      g.op(at(l + ".bwd.mul"), "mul", {at(grad(act(i))), at(dgelu(i))}, {gp});
    }
    g.tensor({at(grad(weight(i))), weight_shape(i),
              ClaimTemplate{grad(weight(i)), weight_slice(i), parts_k(), int64_t(s.dp) * s.mb}});
    g.op(at(l + ".bwd.wgrad"), "matmul", {at(layer_input(i)), gp}, {at(grad(weight(i)))},
         {{"transpose_a", true}});
    if (i == 0) return;  // no gradient for the data
    std::string full = at(grad(act(i - 1))), part = full;
    if (kind == LayerKind::Row) {
      act_tensor(part, grad(act(i - 1)), cols());
    } else {
      if (s.tp > 1) part += ".part";
      act_tensor(part, grad(act(i - 1)), all(), "tp", s.tp);
    }
    g.op(at(l + ".bwd.dgrad"), "matmul", {gp, at_rank(weight(i))}, {part}, {{"transpose_b", true}});
    if (kind != LayerKind::Row && s.tp > 1) {
      act_tensor(full, grad(act(i - 1)), all());
      bool drop = i == 2 && s.bug("tp-input-grad-not-reduced");
      Site site{{{"dp", 0, 0, s.dp}, {"mb", 0, 0, s.mb}}};
      tp_all_reduce(tp_op(l + ".bwd.tp_all_reduce"), part, full, drop ? &site : nullptr, false,
                    drop);
    }
    if (i == s.stage_begin(p) && p > 0)
      g.send(at(grad(act(i - 1))) + ".send", at(grad(act(i - 1))), at(grad(act(i - 1))),
             {{"pp", -1}});
  }

  // Sums the micro-batch tensors at(x) on each rank, as a chain written once
  // with conditions on mb; the last link is `result` and carries `claim`.
  std::string accumulate(const std::string& x, const std::string& result,
                         const std::vector<int64_t>& shape, const ClaimTemplate& claim,
                         bool output) {
    const int M = s.mb;
    if (M == 1) return at_mb("0", x);  // it already carries `claim`
    const std::string last = "mb == " + n(M - 1), acc = result + ".acc{mb}";
    if (M >= 3) {
      g.tensor({acc, shape, std::nullopt, "mb >= 1 && mb <= " + n(M - 2)});
      g.op(acc + ".add", "add", {at_mb("mb-1", x), at(x)}, {acc}, nlohmann::json::object(),
           "mb == 1");
    }
    if (M >= 4)
      g.op(acc + ".add", "add", {result + ".acc{mb-1}", at(x)}, {acc}, nlohmann::json::object(),
           "mb >= 2 && mb <= " + n(M - 2));
    g.tensor({result, shape, claim, last, false, output});
    g.op(result + ".add", "add", {M == 2 ? at_mb("mb-1", x) : result + ".acc{mb-1}", at(x)},
         {result}, nlohmann::json::object(), last);
    return result;
  }

  void update(int i) {
    const std::string w = weight(i), gw = grad(weight(i));
    const std::vector<int64_t> shape = weight_shape(i);
    const std::vector<ExprRange> ws = weight_slice(i);
    std::string synced = accumulate(gw, at_rank(s.dp > 1 ? gw + ".local" : gw), shape,
                                    ClaimTemplate{gw, ws, "dp", s.dp}, false);
    if (s.dp > 1 && !(i == 0 && s.bug("dp-grad-not-synced"))) {
      const std::string op = "tp{tp}.pp{pp}." + gw + ".dp_all_reduce";
      const bool twice = i == 0 && s.bug("dp-grad-double-allreduce");
      const bool mean = i == 0 && s.bug("dp-grad-mean-not-sum");
      if (twice) {
        g.tensor({at_rank(gw + ".once"), shape, ClaimTemplate{gw, ws}, "tp == 0"});
        g.collective(op + ".once", "all_reduce", synced, at_rank(gw + ".once"), {"dp"},
                     {{"reduce", "sum"}}, "tp == 0");
      }
      g.tensor({at_rank(gw), shape, ClaimTemplate{gw, ws}});
      if (twice || mean) {
        // Only tp rank 0 carries the bug.
        g.collective(op, "all_reduce", twice ? at_rank(gw + ".once") : synced, at_rank(gw), {"dp"},
                     {{"reduce", mean ? "mean" : "sum"}}, "tp == 0");
        if (s.tp > 1)
          g.collective(op, "all_reduce", synced, at_rank(gw), {"dp"}, {{"reduce", "sum"}},
                       "tp >= 1");
      } else {
        g.collective(op, "all_reduce", synced, at_rank(gw), {"dp"}, {{"reduce", "sum"}});
      }
      synced = at_rank(gw);
    }
    g.tensor({at_rank(next(w)), shape, ClaimTemplate{next(w), ws}, "", false, true});
    if (!s.adam()) {
      g.op(at_rank(w + ".sgd"), "sgd", {at_rank(w), synced}, {at_rank(next(w))},
           optimizer_attrs(s));
      return;
    }
    for (const std::string& st : {adam_m(i), adam_v(i)})
      g.tensor({at_rank(next(st)), shape, ClaimTemplate{next(st), ws}, "", false, true});
    g.op(at_rank(w + ".adam"), "adam", {at_rank(w), synced, at_rank(adam_m(i)), at_rank(adam_v(i))},
         {at_rank(next(w)), at_rank(next(adam_m(i))), at_rank(next(adam_v(i)))},
         optimizer_attrs(s));
  }

  void reduce_loss() {
    std::string local = accumulate("loss", at_rank(s.dp > 1 ? "loss.local" : "loss"), {},
                                   ClaimTemplate{"loss", {}, "dp", s.dp}, s.dp == 1);
    if (s.dp == 1) return;
    g.tensor({at_rank("loss"), {}, ClaimTemplate{"loss"}, "", false, true});
    g.collective("tp{tp}.pp{pp}.loss.dp_all_reduce", "all_reduce", local, at_rank("loss"), {"dp"},
                 {{"reduce", "sum"}});
  }

  const Layout& s;
  CompactBuilder& g;
};

}  // namespace

nlohmann::json build_compact_parallel(const Layout& layout) {
  CompactBuilder g({{"pp", layout.pp}, {"dp", layout.dp}, {"tp", layout.tp}}, layout.mb);
  CompactMlp(layout, g).build();
  return g.to_json();
}

}  // namespace shardproof::planner::mlp
