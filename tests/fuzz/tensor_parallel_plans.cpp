// Sharded fuzz plans, tensor parallel: a Megatron-style MLP
// y = act(x @ w1) @ w2 (+ b), w1 split by columns and w2 by rows over the
// ranks; each rank's product is a partial sum of y, combined by all_reduce
// (every rank holds y) or reduce_scatter (each rank its rows: sequence
// parallel), maybe summed over rows afterwards.
#include "tests/fuzz/sharded_builder.h"

namespace shardproof::fuzz {

namespace {

class TensorParallel {
 public:
  explicit TensorParallel(Random& r) : b_(r) {}

  FuzzPlan plan() {
    Random& r = b_.r;
    k_ = r.pick(1, 3);
    H_ = b_.world * k_;
    C_ = r.pick(2, 4);
    D_ = r.pick(2, 4);
    R_ = b_.world * r.pick(1, 3);
    static const char* acts[] = {"relu", "gelu", "tanh", "square", "exp", "silu", ""};
    act_ = r.of(acts);
    bias_ = r.coin();
    scatter_ = r.coin();
    claim_act_ = r.coin();
    const bool replicated_w2 = r.coin();
    std::vector<Fault> faults = {Fault::MissingReduction, Fault::DoubledReduction,
                                 Fault::WrongScale};
    if (replicated_w2) faults.push_back(Fault::ShardOffset);
    if (scatter_) faults.push_back(Fault::ShardOrder);
    b_.choose_fault(faults);
    logical();
    inputs(replicated_w2);
    for (int k = 0; k < b_.world; ++k) partial(k);
    combine();
    return b_.done(scatter_ ? "tp-scatter" : "tp-allreduce");
  }

 private:
  void logical() {
    GraphJson& L = b_.L;
    L.tensor("y1", {R_, H_});
    L.op("matmul", {"x", "w1"}, {"y1"});
    std::string a = "y1";
    if (!act_.empty()) {
      L.tensor("a", {R_, H_});
      L.op(act_, {"y1"}, {"a"});
      a = "a";
    }
    L.tensor("y2", {R_, D_});
    L.op("matmul", {a, "w2"}, {"y2"});
    if (bias_) {
      L.tensor("y", {R_, D_});
      L.op("add", {"y2", "b"}, {"y"});
    }
    L.output(bias_ ? "y" : "y2");
  }
  void inputs(bool replicated_w2) {
    const int C = C_, D = D_, k = k_, H = H_;
    b_.shared_input("x", {R_, C_}, "f32", ShardedBuilder::whole);
    b_.shared_input("w1", {C_, H_}, "f32", [&](int r) { return col_slice(C, r * k, r * k + k); });
    b_.shared_input("b", {D_}, "f32", ShardedBuilder::whole);
    if (!replicated_w2) {
      b_.shared_input("w2", {H_, D_}, "f32", [&](int r) { return row_slice(r * k, r * k + k, D); });
      return;
    }
    b_.shared_input("w2", {H_, D_}, "f32", ShardedBuilder::whole, "w2full");
    for (int r = 0; r < b_.world; ++r) {
      int start = r * k;
      if (b_.faulty(Fault::ShardOffset, r)) start = start + k < H ? start + 1 : start - 1;
      b_.rank_op(r, "slice", {"w2full"}, "w2", {k_, D_},
                 {{"dim", 0}, {"start", start}, {"end", start + k}});
    }
  }
  // Rank r's columns of act(x @ w1) times its rows of w2: part r of y2.
  void partial(int r) {
    b_.rank_op(r, "matmul", {"x", "w1"}, "y1", {R_, k_});
    std::string a = "y1";
    if (!act_.empty()) {
      b_.rank_op(r, act_, {"y1"}, "a", {R_, k_});
      a = "a";
    }
    // An intermediate claim (its own stage) on every rank or none: a claim on
    // some ranks only cuts the logical tensor while other ranks recompute
    // it, a false "not equivalent" of stage composition (docs/soundness.md §2).
    if (claim_act_)
      b_.P.claim(ShardedBuilder::at(r, a),
                 {{"tensor", a}, {"slice", col_slice(R_, r * k_, r * k_ + k_)}});
    b_.rank_op(r, "matmul", {a, "w2"}, "p", {R_, D_});
    b_.P.claim(ShardedBuilder::at(r, "p"), {{"tensor", "y2"}, {"part", {r, b_.world}}});
    std::string p = "p";
    if (b_.fault == Fault::WrongScale && bias_) {  // the bias on every part: world * b
      b_.rank_op(r, "add", {"p", "b"}, "pb", {R_, D_});
      p = "pb";
    }
    last_ = p;
  }
  // The partial sums combined (or not, or twice: the faults), then the bias.
  void combine() {
    const int rows = scatter_ ? R_ / b_.world : R_;
    std::string in = last_;
    if (b_.fault == Fault::DoubledReduction) {
      b_.collective("all_reduce", in, "ar0", {R_, D_});
      in = "ar0";
    }
    const std::string reduce =
        b_.fault == Fault::WrongScale && !bias_ ? "mean" : "sum";  // mean of the parts
    if (b_.fault == Fault::MissingReduction) {
      for (int r = 0; r < b_.world; ++r)
        if (scatter_)
          b_.rank_op(r, "slice", {in}, "y2", {rows, D_},
                     {{"dim", 0}, {"start", r * rows}, {"end", r * rows + rows}});
        else
          b_.rank_op(r, "scale", {in}, "y2", {rows, D_}, {{"factor", 1}});
    } else if (scatter_) {
      b_.collective("reduce_scatter", in, "y2", {rows, D_}, {{"dim", 0}, {"reduce", reduce}},
                    b_.fault == Fault::ShardOrder);
    } else {
      b_.collective("all_reduce", in, "y2", {rows, D_}, {{"reduce", reduce}});
    }
    std::string out = "y2";
    if (bias_) {
      const bool added = b_.fault == Fault::WrongScale;  // already on every part
      for (int r = 0; r < b_.world; ++r)
        b_.rank_op(r, added ? "scale" : "add", added ? json{"y2"} : json{"y2", "b"}, "y",
                   {rows, D_}, added ? json{{"factor", 1}} : json::object());
      out = "y";
    }
    const int n = rows;
    b_.claim_all(
        out,
        [&](int r) {
          json of = {{"tensor", out}};
          if (scatter_) of["slice"] = row_slice(r * n, r * n + n, D_);
          return of;
        },
        true);
  }

  ShardedBuilder b_;
  int k_ = 1, H_ = 2, C_ = 2, D_ = 2, R_ = 2;
  std::string act_, last_;
  bool bias_ = false, scatter_ = false, claim_act_ = false;
};

}  // namespace

FuzzPlan tensor_parallel_plan(Random& random) {
  return TensorParallel(random).plan();
}

}  // namespace shardproof::fuzz
