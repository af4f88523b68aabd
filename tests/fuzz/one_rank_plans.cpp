// The soundness fuzzer's first family (docs/soundness.md, section 8): a
// random small graph of elementwise ops, broadcasts, comparisons, `where`,
// reductions broadcast back, softmax and log_softmax (self operands that
// cancel included), and a one-rank parallel copy of it, maybe with one
// fault (an operator swapped, a factor or exponent changed, `where`'s
// branches swapped).
#include "tests/fuzz/one_rank_plans.h"

#include <algorithm>
#include <vector>

namespace shardproof::fuzz {

namespace {

struct Value {
  std::string name;
  json shape;
  std::string dtype;
};

class OneRankGenerator {
 public:
  explicit OneRankGenerator(Random& random) : random_(random) {}

  json plan() {
    ops_ = json::array();
    pool_.clear();
    tensors_ = json::object();
    R_ = pick(2, 5);
    C_ = pick(2, 9);
    add_tensor("x", {R_, C_});
    add_tensor("y", {R_, C_});
    add_tensor("w", {C_});
    add_tensor("p", {R_, C_}, "bool");
    inputs_ = {"x", "y", "w", "p"};
    // Integer ids, valid positions of a small table (their lookup in the
    // pool makes the stage assume it), used as numbers too: a sum of ids
    // is bounded by the table and may saturate a clip.
    if (pick(0, 3) == 0) {
      V_ = pick(2, 5);
      add_tensor("ids", {R_, C_}, "i64");
      add_tensor("tab", {V_, 1});
      inputs_.push_back("ids");
      inputs_.push_back("tab");
      const std::string e = fresh(), ef = fresh(), f = fresh();
      add_tensor(e, {R_, C_, 1}, "f32");
      ops_.push_back(op("embedding", {"ids", "tab"}, e));
      ops_.push_back(op("reshape", {e}, ef, {{"shape", {R_, C_}}}));
      add_tensor(ef, {R_, C_});
      ops_.push_back(op("cast", {"ids"}, f, {{"dtype", "f32"}}));
      add_tensor(f, {R_, C_});
      lookup_ = ef;
      ids_value_ = f;
    }
    const int n = pick(2, 6);
    for (int i = 0; i < n; ++i) step();
    std::string last = pool_.back().name;
    if (!lookup_.empty()) {  // the lookup in the output's cone: the ids are valid positions
      const std::string with = fresh();
      ops_.push_back(op("add", {last, lookup_}, with));
      add_tensor(with, {R_, C_});
      last = with;
    }
    // A final combine along a random dim (or none): where counts show.
    std::string out = last;
    const int how = pick(0, 3);
    if (how < 3 && shape_of(last).size() == 2) {
      out = fresh();
      json dims = how == 2 ? json{0, 1} : json{how};
      json shape = how == 0   ? json{shape_of(last)[1]}
                   : how == 1 ? json{shape_of(last)[0]}
                              : json::array();
      add_tensor(out, shape);
      ops_.push_back(op(pick(0, 3) == 0 ? "mean" : "sum", {last}, out, {{"dims", dims}}));
    }
    return build(out);
  }

  bool faulty() const { return faulty_; }

 private:
  int pick(int lo, int hi) { return random_.pick(lo, hi); }
  std::string fresh() { return "t" + std::to_string(counter_++); }
  json shape_of(const std::string& n) const { return tensors_.at(n).at("shape"); }
  void add_tensor(const std::string& n, json shape, const std::string& dtype = "f32") {
    tensors_[n] = {{"shape", shape}, {"dtype", dtype}};
    if (dtype == "f32" && shape == json{R_, C_}) pool_.push_back({n, shape, dtype});
  }
  json op(const std::string& kind, json in, const std::string& out, json attrs = json::object()) {
    return {{"name", "op" + std::to_string(ops_.size())},
            {"op", kind},
            {"in", in},
            {"out", {out}},
            {"attrs", attrs}};
  }
  json constant(const std::string& out, int value) {
    return op("const", json::array(), out, {{"value", value}, {"shape", json::array()}});
  }
  const Value& any() { return pool_[static_cast<size_t>(pick(0, int(pool_.size())))]; }

  // One random op over the pool, its result a full [R, C] real tensor.
  void step() {
    const std::string out = fresh();
    const std::string a = any().name, b = pick(0, 6) == 0 ? a : any().name;
    static const char* binary[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
    static const char* unary[] = {"exp", "neg", "relu", "square", "tanh"};
    static const char* compare[] = {"eq", "lt", "ge"};
    switch (pick(0, 13)) {
      case 0:
      case 1:
        ops_.push_back(op(binary[pick(0, 6)], {a, b}, out));
        break;
      case 2:
        ops_.push_back(op(binary[pick(0, 3)], {a, "w"}, out));
        break;
      case 3:
        ops_.push_back(op(unary[pick(0, 5)], {a}, out));
        break;
      case 4: {
        static const char* factors[] = {"0", "1/2", "2", "-1"};
        if (pick(0, 2) == 0)
          ops_.push_back(op("scale", {a}, out, {{"factor", factors[pick(0, 4)]}}));
        else
          ops_.push_back(op("pow", {a}, out, {{"exponent", pick(0, 3)}}));
        break;
      }
      case 5: {
        const std::string c = fresh();
        add_tensor(c, {R_, C_}, "bool");
        ops_.push_back(op(compare[pick(0, 3)], {a, b}, c));
        ops_.push_back(op("cast", {c}, out, {{"dtype", "f32"}}));
        break;
      }
      case 6:
        ops_.push_back(op("where", {"p", a, b}, out));
        break;
      case 7: {
        // A row or column statistic, broadcast back by a binary op.
        const std::string r = fresh();
        const int dim = pick(0, 2);
        add_tensor(r, dim == 0 ? json{1, C_} : json{R_, 1});
        static const char* reduce[] = {"sum", "mean", "max"};
        ops_.push_back(op(reduce[pick(0, 3)], {a}, r, {{"dims", {dim}}, {"keepdim", true}}));
        ops_.push_back(op(binary[pick(0, 3)], {b, r}, out));
        break;
      }
      case 9: {
        // A clip at a small constant (a capacity): saturation.
        const std::string c = fresh();
        add_tensor(c, json::array());
        ops_.push_back(constant(c, pick(0, 6)));
        ops_.push_back(op(binary[pick(4, 6)], {a, c}, out));
        break;
      }
      case 10: {
        // A count: flags summed along a dim, clipped, broadcast back.
        const std::string f = fresh(), ff = fresh(), n = fresh(), c = fresh(), k = fresh();
        add_tensor(f, {R_, C_}, "bool");
        ops_.push_back(op(compare[pick(0, 3)], {a, pick(0, 2) ? b : "x"}, f));
        ops_.push_back(op("cast", {f}, ff, {{"dtype", "f32"}}));
        add_tensor(ff, {R_, C_});
        // or the ids as numbers (bounded by the table they index)
        const std::string summand = !ids_value_.empty() && pick(0, 2) ? ids_value_ : ff;
        const int dim = pick(0, 2);
        json kept = dim == 0 ? json{1, C_} : json{R_, 1};
        add_tensor(n, kept);
        ops_.push_back(
            op(pick(0, 3) ? "sum" : "mean", {summand}, n, {{"dims", {dim}}, {"keepdim", true}}));
        add_tensor(c, json::array());
        ops_.push_back(constant(c, pick(1, 7)));
        add_tensor(k, kept);
        ops_.push_back(op(binary[pick(4, 6)], {n, c}, k));
        ops_.push_back(op(binary[pick(0, 3)], {b, k}, out));
        // Broadcast back, the count's line is also a broadcast one and keeps
        // full size: the clipped count is also a second output, beside the
        // lookup summed the same way (no broadcast along the summed line).
        if (side_.empty() && pick(0, 2)) {
          const std::string l = fresh(), side = fresh();
          add_tensor(l, kept);
          ops_.push_back(op("sum", {lookup_.empty() ? "x" : lookup_}, l,
                            {{"dims", {dim}}, {"keepdim", true}}));
          add_tensor(side, kept);
          ops_.push_back(op("add", {k, l}, side));
          side_ = side;
        }
        break;
      }
      case 11: {
        // A floor: the integer cast of a value (of a mean: a count / n).
        const std::string i = fresh();
        add_tensor(i, {R_, C_}, "i64");
        ops_.push_back(op("cast", {a}, i, {{"dtype", "i64"}}));
        ops_.push_back(op("cast", {i}, out, {{"dtype", "f32"}}));
        break;
      }
      case 12: {
        // A value recomputed through data movement (reshape there and
        // back, transpose twice), combined with the original.
        const std::string m = fresh(), r = fresh();
        if (pick(0, 2)) {
          add_tensor(m, {R_ * C_});
          ops_.push_back(op("reshape", {a}, m, {{"shape", {R_ * C_}}}));
          ops_.push_back(op("reshape", {m}, r, {{"shape", {R_, C_}}}));
        } else {
          add_tensor(m, {C_, R_});
          ops_.push_back(op("transpose", {a}, m, {{"perm", {1, 0}}}));
          ops_.push_back(op("transpose", {m}, r, {{"perm", {1, 0}}}));
        }
        add_tensor(r, {R_, C_});
        ops_.push_back(op(binary[pick(0, 6)], {a, r}, out));
        break;
      }
      default: {
        static const char* composite[] = {"softmax", "log_softmax"};
        ops_.push_back(op(composite[pick(0, 2)], {a}, out, {{"dim", pick(0, 2)}}));
        break;
      }
    }
    add_tensor(out, {R_, C_});
  }

  // Parallel side: one rank, the same ops under "r." names, maybe one fault.
  json build(const std::string& out) {
    json pt = json::object(), pops = json::array(), pin = json::array();
    auto pn = [](const std::string& n) { return "r." + n; };
    for (auto& [n, t] : tensors_.items()) {
      json d = t;
      d["rank"] = 0;
      if (n == out || n == side_ || std::find(inputs_.begin(), inputs_.end(), n) != inputs_.end())
        d["of"] = {{"tensor", n}};
      pt[pn(n)] = d;
    }
    for (const std::string& n : inputs_) pin.push_back(pn(n));
    for (json o : ops_) {
      for (auto& i : o["in"]) i = pn(i.get<std::string>());
      for (auto& i : o["out"]) i = pn(i.get<std::string>());
      pops.push_back(o);
    }
    faulty_ = pick(0, 2) == 0;
    if (faulty_) inject(pops);
    json outputs = {out}, poutputs = {pn(out)};
    if (!side_.empty() && side_ != out) outputs.push_back(side_), poutputs.push_back(pn(side_));
    return {
        {"format", "shardproof-plan/1"},
        {"name", "fuzz"},
        {"logical",
         {{"tensors", tensors_}, {"inputs", inputs_}, {"ops", ops_}, {"outputs", outputs}}},
        {"parallel",
         {{"world", 1}, {"tensors", pt}, {"inputs", pin}, {"ops", pops}, {"outputs", poutputs}}}};
  }

  void inject(json& pops) {
    // Half the time a clip's constant, when there is one (a capacity moved
    // past what a reduced line can reach: saturation).
    std::vector<size_t> consts;
    for (size_t i = 0; i < pops.size(); ++i)
      if (pops[i]["op"] == "const") consts.push_back(i);
    const size_t at = !consts.empty() && pick(0, 2)
                          ? consts[static_cast<size_t>(pick(0, int(consts.size())))]
                          : static_cast<size_t>(pick(0, int(pops.size())));
    json& o = pops[at];
    const std::string k = o["op"];
    auto swap = [&](const char* a, const char* b) {
      if (k == a)
        o["op"] = b;
      else if (k == b)
        o["op"] = a;
    };
    swap("add", "sub");
    swap("mul", "div");
    swap("maximum", "minimum");
    swap("sum", "mean");
    swap("softmax", "log_softmax");
    swap("exp", "tanh");
    if (k == "scale") o["attrs"]["factor"] = pick(0, 2) ? "3" : "1/3";
    if (k == "pow") o["attrs"]["exponent"] = (o["attrs"]["exponent"].get<int>() + 1) % 3;
    if (k == "where") std::swap(o["in"][1], o["in"][2]);
    if (k == "lt") o["op"] = "ge";
    if (k == "const") o["attrs"]["value"] = pick(0, 2) ? 100 : o["attrs"]["value"].get<int>() + 1;
  }

  Random& random_;
  int64_t R_ = 2, C_ = 2, V_ = 2;
  int counter_ = 0;
  json tensors_, ops_;
  std::vector<Value> pool_;
  std::vector<std::string> inputs_;
  std::string lookup_, ids_value_;  // the ids' lookup and their value as reals, when drawn
  std::string side_;                // a clipped count, a second output
  bool faulty_ = false;
};

}  // namespace

FuzzPlan one_rank_plan(Random& random) {
  OneRankGenerator gen(random);
  FuzzPlan p;
  p.plan = gen.plan();
  p.faulty = gen.faulty();
  p.kind = "one-rank";
  return p;
}

}  // namespace shardproof::fuzz
