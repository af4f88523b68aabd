// Sharded fuzz plans with integer positions: token ids index a vocabulary
// split over the ranks (Megatron's vocab-parallel embedding and the target
// logit of its cross entropy). Each rank masks the ids outside its shard,
// subtracts its offset, looks up (embedding, gather, or a one-hot built from
// iota plus the offset), and the partial results are all-reduced; maybe
// summed over the tokens.
#include "tests/fuzz/sharded_builder.h"

namespace shardproof::fuzz {

namespace {

class VocabParallel {
 public:
  explicit VocabParallel(Random& r) : b_(r) {}

  FuzzPlan plan() {
    Random& r = b_.r;
    T_ = r.pick(2, 5);
    k_ = r.pick(2, 4);
    V_ = b_.world * k_;
    how_ = static_cast<How>(r.pick(0, 3));
    D_ = how_ == Gather ? 1 : r.pick(1, 4);
    tail_ = static_cast<Tail>(r.pick(0, 3));
    claim_parts_ = r.coin();  // each rank's part claimed: a stage of its own
    std::vector<Fault> faults = {Fault::ShardOffset, Fault::MissingReduction,
                                 Fault::DoubledReduction, Fault::WrongScale};
    if (how_ != OneHot) faults.push_back(Fault::MissingMask);
    b_.choose_fault(faults);
    logical();
    inputs();
    for (int rank = 0; rank < b_.world; ++rank) how_ == OneHot ? one_hot(rank) : masked(rank);
    combine();
    static const char* names[] = {"vocab-embedding", "vocab-onehot", "vocab-gather"};
    return b_.done(names[how_]);
  }

 private:
  enum How { Embedding, OneHot, Gather };
  enum Tail { None, SumAfter, SumBefore };

  void logical() {
    GraphJson& L = b_.L;
    L.tensor("out", {T_, D_});
    if (how_ == Embedding) {
      L.op("embedding", {"ids", "table"}, {"out"});
    } else {
      L.tensor("ids2", {T_, 1}, "i64");
      L.op("reshape", {"ids"}, {"ids2"}, {{"shape", {T_, 1}}});
      if (how_ == Gather) {
        L.op("gather", {"table", "ids2"}, {"out"}, {{"dim", 1}});
      } else {
        L.tensor("iota", {1, V_}, "i64");
        L.op("iota", json::array(), {"iota"}, {{"shape", {1, V_}}, {"dim", 1}});
        L.tensor("hit", {T_, V_}, "bool");
        L.op("eq", {"ids2", "iota"}, {"hit"});
        L.tensor("onehot", {T_, V_});
        L.op("cast", {"hit"}, {"onehot"}, {{"dtype", "f32"}});
        L.op("matmul", {"onehot", "table"}, {"out"});
      }
    }
    if (tail_ == None) return L.output("out");
    L.tensor("s", {D_});
    L.op("sum", {"out"}, {"s"}, {{"dims", {0}}});
    L.output("s");
  }
  void inputs() {
    const int k = k_, D = D_, T = T_;
    b_.shared_input("ids", {T_}, "i64", ShardedBuilder::whole);
    if (how_ == Gather)
      b_.shared_input("table", {T_, V_}, "f32",
                      [&](int r) { return col_slice(T, r * k, r * k + k); });
    else
      b_.shared_input("table", {V_, D_}, "f32",
                      [&](int r) { return row_slice(r * k, r * k + k, D); });
  }
  // An integer scalar constant on rank r.
  void int_const(int r, const std::string& name, int value) {
    b_.rank_op(r, "const", json::array(), name, json::array(),
               {{"value", value}, {"shape", json::array()}}, "i64");
  }
  // The rank's offset as the code writes it: a ShardOffset fault moves it.
  int offset(int r) { return r * k_ + (b_.faulty(Fault::ShardOffset, r) ? 1 : 0); }

  // Ids outside [lo, hi) are masked to row 0 of the shard and their rows to 0.
  void masked(int r) {
    const int lo = r * k_;
    const bool bad_bound = b_.faulty(Fault::ShardOffset, r) && b_.r.coin();
    int_const(r, "lo", bad_bound ? lo + 1 : lo);
    int_const(r, "hi", lo + k_);
    int_const(r, "lo_sub", bad_bound ? lo : offset(r));
    int_const(r, "zero", 0);
    b_.rank_op(r, "ge", {"ids", "lo"}, "ge", {T_}, json::object(), "bool");
    b_.rank_op(r, "lt", {"ids", "hi"}, "lt", {T_}, json::object(), "bool");
    b_.rank_op(r, "sub", {"ids", "lo_sub"}, "local", {T_}, json::object(), "i64");
    const bool unmasked_index = b_.faulty(Fault::MissingMask, r) && b_.r.coin();
    std::string index = "local";
    if (!unmasked_index) {
      b_.rank_op(r, "where", {"ge", "local", "zero"}, "m1", {T_}, json::object(), "i64");
      b_.rank_op(r, "where", {"lt", "m1", "zero"}, "m2", {T_}, json::object(), "i64");
      index = "m2";
    }
    if (how_ == Embedding) {
      b_.rank_op(r, "embedding", {index, "table"}, "e", {T_, D_});
    } else {
      b_.rank_op(r, "reshape", {index}, "index2", {T_, 1}, {{"shape", {T_, 1}}}, "i64");
      b_.rank_op(r, "gather", {"table", "index2"}, "e", {T_, 1}, {{"dim", 1}});
    }
    if (b_.faulty(Fault::MissingMask, r) && !unmasked_index) return part(r, "e");
    for (const char* m : {"ge", "lt"})
      b_.rank_op(r, "reshape", {m}, std::string(m) + "2", {T_, 1}, {{"shape", {T_, 1}}}, "bool");
    // A real zero without `dtype` (issue 20, family 6) half of the time.
    json zero = {{"value", 0}, {"shape", json::array()}};
    if (b_.r.coin()) zero["dtype"] = "f32";
    b_.rank_op(r, "const", json::array(), "zf", json::array(), zero);
    b_.rank_op(r, "where", {"ge2", "e", "zf"}, "e1", {T_, D_});
    b_.rank_op(r, "where", {"lt2", "e1", "zf"}, "e2", {T_, D_});
    part(r, "e2");
  }
  // The shard's rows of the one-hot: iota plus the offset, compared with the ids.
  void one_hot(int r) {
    int_const(r, "lo", offset(r));
    b_.rank_op(r, "iota", json::array(), "iota", {1, k_}, {{"shape", {1, k_}}, {"dim", 1}}, "i64");
    b_.rank_op(r, "add", {"iota", "lo"}, "pos", {1, k_}, json::object(), "i64");
    b_.rank_op(r, "reshape", {"ids"}, "ids2", {T_, 1}, {{"shape", {T_, 1}}}, "i64");
    b_.rank_op(r, "eq", {"ids2", "pos"}, "hit", {T_, k_}, json::object(), "bool");
    b_.rank_op(r, "cast", {"hit"}, "onehot", {T_, k_}, {{"dtype", "f32"}});
    b_.rank_op(r, "matmul", {"onehot", "table"}, "e", {T_, D_});
    part(r, "e");
  }
  void part(int r, const std::string& e) {
    b_.rank_op(r, "scale", {e}, "p", {T_, D_}, {{"factor", 1}});
    if (claim_parts_)
      b_.P.claim(ShardedBuilder::at(r, "p"), {{"tensor", "out"}, {"part", {r, b_.world}}});
  }

  // all_reduce of the parts (or not, twice, or averaged: the faults), the
  // token sum before or after it.
  void combine() {
    std::string cur = "p";
    json shape = {T_, D_};
    if (tail_ == SumBefore) {
      for (int r = 0; r < b_.world; ++r) b_.rank_op(r, "sum", {"p"}, "ps", {D_}, {{"dims", {0}}});
      cur = "ps";
      shape = {D_};
    }
    if (b_.fault != Fault::MissingReduction) {
      const json attrs = {{"reduce", b_.fault == Fault::WrongScale ? "mean" : "sum"}};
      b_.collective("all_reduce", cur, "ar", shape, attrs);
      cur = "ar";
      if (b_.fault == Fault::DoubledReduction) {
        b_.collective("all_reduce", cur, "ar2", shape, attrs);
        cur = "ar2";
      }
    }
    if (tail_ == SumAfter) {
      for (int r = 0; r < b_.world; ++r) b_.rank_op(r, "sum", {cur}, "s", {D_}, {{"dims", {0}}});
      cur = "s";
    }
    const std::string of = tail_ == None ? "out" : "s";
    b_.claim_all(
        cur,
        [&](int) {
          return json{{"tensor", of}};
        },
        true);
  }

  ShardedBuilder b_;
  int T_ = 2, k_ = 2, V_ = 4, D_ = 1;
  How how_ = Embedding;
  Tail tail_ = None;
  bool claim_parts_ = false;
};

}  // namespace

FuzzPlan vocab_parallel_plan(Random& random) {
  return VocabParallel(random).plan();
}

}  // namespace shardproof::fuzz
