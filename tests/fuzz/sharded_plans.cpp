// Sharded fuzz plans: rows split over the ranks (data parallel: the rows'
// results sliced, gathered, or summed over rows and combined by all_reduce
// or reduce_scatter) and a Megatron-style MLP (tensor parallel: column and
// row shards, partial sums all-reduced or reduce-scattered). The integer
// position family is vocab_plans.cpp.
#include "tests/fuzz/sharded_plans.h"

#include <functional>

#include "tests/fuzz/sharded_builder.h"

namespace shardproof::fuzz {

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::None:
      return "none";
    case Fault::ShardOffset:
      return "shard-offset";
    case Fault::ShardOrder:
      return "shard-order";
    case Fault::MissingReduction:
      return "missing-reduction";
    case Fault::DoubledReduction:
      return "doubled-reduction";
    case Fault::WrongScale:
      return "wrong-scale";
    case Fault::MissingMask:
      return "missing-mask";
  }
  return "?";
}

namespace {

// Declares `out` (of `shape`) and adds `kind(in) -> out` on one graph.
using Put = std::function<void(const std::string& kind, json in, const std::string& out, json shape,
                               json attrs)>;

// A row-local chain: every op treats each row alike and alone, so running
// it on a rank's rows gives those rows of the logical result.
struct RowChain {
  enum Kind { MatmulW, Unary, Bias, RowSoftmax, RowStat, SelfBinary };
  struct Step {
    Kind kind;
    std::string op;
    int dim = 1;
  };
  std::vector<Step> steps;

  static RowChain random(Random& r) {
    RowChain c;
    static const char* unary[] = {"exp", "tanh", "relu", "square", "neg", "gelu"};
    static const char* stat[] = {"sum", "mean", "max"};
    static const char* self[] = {"sub", "div", "mul"};
    if (r.coin()) c.steps.push_back({MatmulW, "matmul"});
    for (int i = r.pick(c.steps.empty() ? 1 : 0, 4); i > 0; --i) {
      switch (r.pick(0, 6)) {
        case 0:
          c.steps.push_back({Unary, r.of(unary)});
          break;
        case 1:
          c.steps.push_back({Bias, "add"});
          break;
        case 2:
          c.steps.push_back({RowSoftmax, r.coin() ? "softmax" : "log_softmax"});
          break;
        case 3:
          c.steps.push_back({RowStat, r.of(stat)});
          break;
        case 4:
          c.steps.push_back({SelfBinary, r.of(self)});
          break;
        default:
          c.steps.push_back({MatmulW, "matmul"});
          break;
      }
    }
    return c;
  }

  // Emits the chain from `x` ([rows, C]); returns the last tensor, its width in `width`.
  std::string emit(const std::string& x, int rows, int C, int H, const Put& put, int& width) const {
    std::string cur = x;
    width = C;
    int n = 0;
    for (const Step& s : steps) {
      const std::string out = "h" + std::to_string(n++);
      switch (s.kind) {
        case MatmulW:
          if (width != C) continue;  // w is [C, H]: only from a C-wide tensor
          width = H;
          put("matmul", {cur, "w"}, out, {rows, width}, json::object());
          break;
        case Unary:
          put(s.op, {cur}, out, {rows, width}, json::object());
          break;
        case Bias:
          put("add", {cur, width == H ? "bh" : "bc"}, out, {rows, width}, json::object());
          break;
        case RowSoftmax:
          put(s.op, {cur}, out, {rows, width}, {{"dim", 1}});
          break;
        case RowStat: {
          const std::string st = "s" + out;
          put(s.op, {cur}, st, {rows, 1}, {{"dims", {1}}, {"keepdim", true}});
          put("sub", {cur, st}, out, {rows, width}, json::object());
          break;
        }
        case SelfBinary:
          put(s.op, {cur, cur}, out, {rows, width}, json::object());
          break;
      }
      cur = out;
    }
    return cur;
  }
};

class RowParallel {
 public:
  explicit RowParallel(Random& r) : b_(r) {}

  FuzzPlan plan() {
    Random& r = b_.r;
    per_ = r.pick(1, 4);
    R_ = b_.world * per_;
    C_ = r.pick(2, 5);
    H_ = b_.world * r.pick(1, 3);
    const RowChain chain = RowChain::random(r);
    const std::string h = chain.emit("x", R_, C_, H_, logical_put(), width_);
    enum Finish { Sliced, Gathered, SummedAllReduce, MeanAllReduce, MeanOfMeans, Scattered };
    Finish finish = static_cast<Finish>(r.pick(0, 6));
    if (finish == Scattered && width_ % b_.world != 0) finish = SummedAllReduce;
    const bool replicated = r.coin();  // x whole on every rank, sliced by an op
    std::vector<Fault> faults;
    if (replicated) faults.push_back(Fault::ShardOffset);
    if (finish == Gathered || finish == Scattered) faults.push_back(Fault::ShardOrder);
    if (finish >= SummedAllReduce)
      for (Fault f : {Fault::MissingReduction, Fault::DoubledReduction, Fault::WrongScale})
        faults.push_back(f);
    b_.choose_fault(faults);
    inputs(replicated);
    int width = C_;
    for (int k = 0; k < b_.world; ++k)
      chain.emit(replicated ? "xs" : "x", per_, C_, H_, rank_put(k), width);
    switch (finish) {
      case Sliced:
        sliced(h);
        break;
      case Gathered:
        gathered(h);
        break;
      case SummedAllReduce:
        summed(h, false);
        break;
      case MeanAllReduce:
        summed(h, true);
        break;
      case MeanOfMeans:
        mean_of_means(h);
        break;
      case Scattered:
        scattered(h);
        break;
    }
    return b_.done("rows");
  }

 private:
  void inputs(bool replicated) {
    const int R = R_, C = C_, per = per_;
    if (replicated) {
      b_.shared_input("x", {R, C}, "f32", ShardedBuilder::whole);
      for (int k = 0; k < b_.world; ++k) {
        int start = k * per;
        if (b_.faulty(Fault::ShardOffset, k)) start = start + per < R ? start + 1 : start - 1;
        b_.P.tensor(ShardedBuilder::at(k, "xs"), {per, C}, "f32", k);
        b_.P.op("slice", {ShardedBuilder::at(k, "x")}, {ShardedBuilder::at(k, "xs")},
                {{"dim", 0}, {"start", start}, {"end", start + per}});
      }
    } else {
      b_.shared_input("x", {R, C}, "f32",
                      [&](int k) { return row_slice(k * per, k * per + per, C); });
    }
    b_.shared_input("w", {C, H_}, "f32", ShardedBuilder::whole);
    b_.shared_input("bc", {C}, "f32", ShardedBuilder::whole);
    b_.shared_input("bh", {H_}, "f32", ShardedBuilder::whole);
  }
  Put logical_put() {
    return
        [this](const std::string& kind, json in, const std::string& out, json shape, json attrs) {
          b_.L.tensor(out, shape);
          b_.L.op(kind, in, {out}, attrs);
        };
  }
  Put rank_put(int k) {
    return [this, k](const std::string& kind, json in, const std::string& out, json shape,
                     json attrs) { b_.rank_op(k, kind, in, out, shape, attrs); };
  }
  json rows_of(int k) const { return row_slice(k * per_, k * per_ + per_, width_); }

  void sliced(const std::string& h) {
    b_.L.output(h);
    b_.claim_all(
        h,
        [&](int k) {
          return json{{"tensor", h}, {"slice", rows_of(k)}};
        },
        true);
  }
  void gathered(const std::string& h) {
    b_.L.output(h);
    if (b_.r.coin())  // an intermediate claim: its own stage
      b_.claim_all(h, [&](int k) { return json{{"tensor", h}, {"slice", rows_of(k)}}; });
    b_.collective("all_gather", h, "all", {R_, width_}, {{"dim", 0}},
                  b_.fault == Fault::ShardOrder);
    b_.claim_all(
        "all",
        [&](int) {
          return json{{"tensor", h}};
        },
        true);
  }
  // s = sum (or mean) of h over its rows; each rank sums its rows and the
  // parts are all-reduced (a mean then divided by R).
  void summed(const std::string& h, bool mean) {
    b_.L.tensor("s", {width_});
    b_.L.op(mean ? "mean" : "sum", {h}, {"s"}, {{"dims", {0}}});
    b_.L.output("s");
    for (int k = 0; k < b_.world; ++k) b_.rank_op(k, "sum", {h}, "ps", {width_}, {{"dims", {0}}});
    const int n = b_.world, R = R_;
    b_.claim_all("ps", [&](int k) {
      json of = {{"tensor", "s"}, {"part", {k, n}}};
      if (mean) of["scale"] = R;  // ps = R * (part k of the mean)
      return of;
    });
    std::string total = all_reduced("ps", "sum", !mean);
    if (mean) {
      const int count = b_.fault == Fault::WrongScale ? per_ : R_;  // the local count is wrong
      for (int k = 0; k < b_.world; ++k)
        b_.rank_op(k, "scale", {total}, "s", {width_}, {{"factor", "1/" + std::to_string(count)}});
      total = "s";
    }
    b_.claim_all(
        total,
        [&](int) {
          return json{{"tensor", "s"}};
        },
        true);
  }
  void mean_of_means(const std::string& h) {
    b_.L.tensor("s", {width_});
    b_.L.op("mean", {h}, {"s"}, {{"dims", {0}}});
    b_.L.output("s");
    for (int k = 0; k < b_.world; ++k) b_.rank_op(k, "mean", {h}, "pm", {width_}, {{"dims", {0}}});
    const std::string total = all_reduced("pm", "mean", true);
    b_.claim_all(
        total,
        [&](int) {
          return json{{"tensor", "s"}};
        },
        true);
  }
  // The partial sums all-reduced (or not, or twice, or averaged: the faults).
  // With `scale_fault`, WrongScale takes the other reduction (mean for sum).
  std::string all_reduced(const std::string& part, const std::string& reduce, bool scale_fault) {
    if (b_.fault == Fault::MissingReduction) return part;
    std::string how = reduce;
    if (scale_fault && b_.fault == Fault::WrongScale) how = reduce == "sum" ? "mean" : "sum";
    b_.collective("all_reduce", part, "ar", {width_}, {{"reduce", how}});
    if (b_.fault != Fault::DoubledReduction) return "ar";
    b_.collective("all_reduce", "ar", "ar2", {width_}, {{"reduce", how}});
    return "ar2";
  }
  void scattered(const std::string& h) {
    b_.L.tensor("s", {width_});
    b_.L.op("sum", {h}, {"s"}, {{"dims", {0}}});
    b_.L.output("s");
    for (int k = 0; k < b_.world; ++k) b_.rank_op(k, "sum", {h}, "ps", {width_}, {{"dims", {0}}});
    const int piece = width_ / b_.world;
    std::string in = "ps";
    if (b_.fault == Fault::DoubledReduction) {
      b_.collective("all_reduce", "ps", "ar", {width_});
      in = "ar";
    }
    if (b_.fault == Fault::MissingReduction) {
      for (int k = 0; k < b_.world; ++k)
        b_.rank_op(k, "slice", {in}, "rs", {piece},
                   {{"dim", 0}, {"start", k * piece}, {"end", k * piece + piece}});
    } else {
      b_.collective("reduce_scatter", in, "rs", {piece},
                    {{"dim", 0}, {"reduce", b_.fault == Fault::WrongScale ? "mean" : "sum"}},
                    b_.fault == Fault::ShardOrder);
    }
    b_.claim_all(
        "rs",
        [&](int k) {
          return json{{"tensor", "s"}, {"slice", {{k * piece, k * piece + piece}}}};
        },
        true);
  }

  ShardedBuilder b_;
  int per_ = 1, R_ = 2, C_ = 2, H_ = 2, width_ = 2;
};

}  // namespace

FuzzPlan sharded_plan(Random& random) {
  switch (random.pick(0, 3)) {
    case 0:
      return RowParallel(random).plan();
    case 1:
      return tensor_parallel_plan(random);
    default:
      return vocab_parallel_plan(random);
  }
}

}  // namespace shardproof::fuzz
