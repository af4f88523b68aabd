// What the sharded fuzz families share (sharded_plans.cpp, vocab_plans.cpp):
// both graphs under construction, the world, the fault chosen, and helpers
// for per-rank names, claims and collectives.
#pragma once

#include <string>
#include <vector>

#include "tests/fuzz/fuzz_plan.h"
#include "tests/fuzz/sharded_plans.h"

namespace shardproof::fuzz {

class ShardedBuilder {
 public:
  explicit ShardedBuilder(Random& random) : r(random), world(random.pick(2, 4)) {}

  Random& r;
  const int world;
  GraphJson L, P;
  Fault fault = Fault::None;
  int faulty_rank = 0;

  // Picks the fault: none half of the time, else one of `possible`.
  void choose_fault(const std::vector<Fault>& possible) {
    fault = possible.empty() || r.coin()
                ? Fault::None
                : possible[static_cast<size_t>(r.pick(0, static_cast<int>(possible.size())))];
    faulty_rank = r.pick(0, world);
  }
  bool faulty(Fault f, int rank) const { return fault == f && rank == faulty_rank; }

  static std::string at(int rank, const std::string& name) {
    return "r" + std::to_string(rank) + "." + name;
  }
  std::string fresh(const std::string& stem) { return stem + std::to_string(counter_++); }

  // A logical input and, on every rank, a parallel input that claims it (or
  // the slice `slice(rank)` of it).
  // `local` names the parallel inputs (default: `name`).
  template <class SliceOf>
  void shared_input(const std::string& name, json shape, const std::string& dtype,
                    const SliceOf& slice, const std::string& local_name = "") {
    const std::string local_ = local_name.empty() ? name : local_name;
    L.tensor(name, shape, dtype);
    L.input(name);
    for (int k = 0; k < world; ++k) {
      json of = {{"tensor", name}};
      json s = slice(k);
      json local = shape;
      if (!s.is_null()) {
        of["slice"] = s;
        for (size_t d = 0; d < s.size(); ++d) local[d] = s[d][1].get<int>() - s[d][0].get<int>();
      }
      P.tensor(at(k, local_), local, dtype, k, of);
      P.input(at(k, local_));
    }
  }
  static json whole(int) { return nullptr; }

  // An op on rank k of the parallel graph; the output is declared here.
  void rank_op(int k, const std::string& kind, json in, const std::string& out, json shape,
               json attrs = json::object(), const std::string& dtype = "f32") {
    P.tensor(at(k, out), std::move(shape), dtype, k);
    for (auto& i : in) i = at(k, i.get<std::string>());
    P.op(kind, std::move(in), {at(k, out)}, std::move(attrs));
  }
  // A collective over every rank: `in` on each rank gives `out` (of shape
  // `shape`). With `reversed`, the group lists the ranks backwards.
  void collective(const std::string& kind, const std::string& in, const std::string& out,
                  json shape, json attrs = json::object(), bool reversed = false) {
    json ins = json::array(), outs = json::array(), group = json::array();
    for (int i = 0; i < world; ++i) {
      const int k = reversed ? world - 1 - i : i;
      P.tensor(at(k, out), shape, "f32", k);
      ins.push_back(at(k, in));
      outs.push_back(at(k, out));
      group.push_back(k);
    }
    P.op(kind, ins, outs, std::move(attrs), group);
  }
  // Every rank's `name` claims `of(rank)`; the claimed tensors may be outputs.
  template <class Of>
  void claim_all(const std::string& name, const Of& of, bool output = false) {
    for (int k = 0; k < world; ++k) {
      P.claim(at(k, name), of(k));
      if (output) P.output(at(k, name));
    }
  }

  FuzzPlan done(const std::string& kind) const {
    FuzzPlan p;
    p.plan = plan_document(L, P, world);
    p.faulty = fault != Fault::None;
    p.kind = kind + (p.faulty ? std::string("/") + fault_name(fault) : "");
    return p;
  }

 private:
  int counter_ = 0;
};

// Rows lo..hi of a tensor with `cols` columns, as a lineage slice.
inline json row_slice(int lo, int hi, int cols) {
  return json::array({json::array({lo, hi}), json::array({0, cols})});
}
inline json col_slice(int rows, int lo, int hi) {
  return json::array({json::array({0, rows}), json::array({lo, hi})});
}

// The families (sharded_plans.cpp draws one of them, and of its own rows).
FuzzPlan tensor_parallel_plan(Random& random);  // tensor_parallel_plans.cpp
FuzzPlan vocab_parallel_plan(Random& random);   // vocab_plans.cpp

}  // namespace shardproof::fuzz
