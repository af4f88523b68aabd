// Hand-written plans, written to the contract (docs/plan-format-v1.md)
// rather than to the engine: each realistic parallel pattern as a correct plan
// (must be equivalent) next to buggy twins (must be not equivalent, with the
// first finding naming the logical tensor where the bug first shows).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tests/test_support.h"

namespace shardproof {
namespace {

using nlohmann::json;

using Dims = std::vector<int64_t>;
using Names = std::vector<std::string>;
using Ranges = std::vector<std::pair<int64_t, int64_t>>;
using Group = std::vector<int>;

json obj() {
  return json::object();
}

// Lineage: `tensor`, optional slice (one [lo, hi) per dimension), optional part [k, n].
json of(const std::string& tensor, const Ranges& slice = {}, int k = -1, int n = 0) {
  json o = {{"tensor", tensor}};
  if (!slice.empty()) {
    json s = json::array();
    for (auto [lo, hi] : slice) s.push_back(json::array({lo, hi}));
    o["slice"] = s;
  }
  if (n > 0) o["part"] = json::array({k, n});
  return o;
}
json part(const std::string& tensor, int k, int n) {
  return of(tensor, {}, k, n);
}

json names(const Names& v) {
  json a = json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}
json dims(const Dims& v) {
  json a = json::array();
  for (auto d : v) a.push_back(d);
  return a;
}

// A graph under construction. Logical graphs use rank -1 and no lineage.
class Graph {
 public:
  explicit Graph(int world = 0) : world_(world) {}

  // Declares a tensor (no producer).
  Graph& t(const std::string& name, const Dims& shape, json lineage = nullptr, int rank = -1,
           const std::string& dtype = "f32") {
    json d = {{"shape", dims(shape)}, {"dtype", dtype}};
    if (rank >= 0) d["rank"] = rank;
    if (!lineage.is_null()) d["of"] = lineage;
    tensors_[name] = d;
    return *this;
  }
  // Logical input.
  Graph& in(const std::string& name, const Dims& shape, const std::string& dtype = "f32") {
    t(name, shape, nullptr, -1, dtype);
    inputs_.push_back(name);
    return *this;
  }
  // Parallel input on `rank`.
  Graph& pin(int rank, const std::string& name, const Dims& shape, json lineage,
             const std::string& dtype = "f32") {
    t(name, shape, lineage, rank, dtype);
    inputs_.push_back(name);
    return *this;
  }
  // An op whose outputs are already declared.
  Graph& op(const std::string& kind, const Names& in, const Names& out, json attrs = obj()) {
    ops_.push_back({{"name", "op." + out.at(0)},
                    {"op", kind},
                    {"in", names(in)},
                    {"out", names(out)},
                    {"attrs", attrs}});
    return *this;
  }
  // Logical op with one output, declared here.
  Graph& def(const std::string& name, const Dims& shape, const std::string& kind, const Names& in,
             json attrs = obj(), const std::string& dtype = "f32") {
    t(name, shape, nullptr, -1, dtype);
    return op(kind, in, {name}, attrs);
  }
  // Parallel op with one output on `rank`, declared here (lineage may be null).
  Graph& pdef(int rank, const std::string& name, const Dims& shape, json lineage,
              const std::string& kind, const Names& in, json attrs = obj(),
              const std::string& dtype = "f32") {
    t(name, shape, lineage, rank, dtype);
    ops_.push_back({{"name", "op." + name},
                    {"op", kind},
                    {"in", names(in)},
                    {"out", names({name})},
                    {"attrs", attrs},
                    {"rank", rank}});
    return *this;
  }
  // A collective over `group`; its outputs are already declared.
  Graph& coll(const std::string& kind, const Group& group, const Names& in, const Names& out,
              json attrs = obj()) {
    json g = json::array();
    for (int r : group) g.push_back(r);
    ops_.push_back({{"name", kind + "." + out.at(0)},
                    {"op", kind},
                    {"in", names(in)},
                    {"out", names(out)},
                    {"attrs", attrs},
                    {"group", g}});
    return *this;
  }
  Graph& out(const Names& v) {
    for (const auto& s : v) outputs_.push_back(s);
    return *this;
  }
  json to_json() const {
    json g = {{"tensors", tensors_}, {"inputs", inputs_}, {"ops", ops_}, {"outputs", outputs_}};
    if (world_ > 0) g["world"] = world_;
    return g;
  }

 private:
  int world_;
  json tensors_ = json::object(), inputs_ = json::array(), ops_ = json::array(),
       outputs_ = json::array();
};

json plan(const Graph& logical, const Graph& parallel) {
  return {{"format", "shardproof-plan/1"},
          {"name", "contract"},
          {"logical", logical.to_json()},
          {"parallel", parallel.to_json()}};
}

std::string R(int r) {
  return "r" + std::to_string(r) + ".";
}

// What a verification gave, read back from a child process.
struct Outcome {
  bool finished = false;  // false: no verdict before the deadline, or the child died
  std::string failure;    // why not finished
  Verdict verdict = Verdict::InternalError;
  std::string first_kind, first_tensor, text;
};

// Each plan is verified in a forked child with a deadline, so that a solver
// that does not stop (an engine bug) fails one expectation instead of
// hanging the whole test binary.
constexpr int kDeadlineSeconds = 30;

Outcome verify_bounded(const json& p, const std::string& stem) {
  const std::string path = testing::write_temp_plan(p, "contract-" + stem);
  Outcome out;
  int fds[2];
  if (pipe(fds) != 0) {
    out.failure = "pipe failed";
    return out;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    VerifyOptions options;
    options.jobs = 2;
    const Report r = verify_plan_file(path, options);
    json j = {{"verdict", static_cast<int>(r.verdict)},
              {"kind", r.findings.empty() ? "" : r.findings[0].kind},
              {"tensor", r.findings.empty() ? "" : r.findings[0].tensor},
              {"text", report_to_text(r)}};
    const std::string bytes = j.dump();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = write(fds[1], bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string bytes;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDeadlineSeconds);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd = {fds[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    out.failure = "no verdict within " + std::to_string(kDeadlineSeconds) + " s (" + path + ")";
    return out;
  }
  if (!WIFEXITED(status) || bytes.empty()) {
    out.failure = "the verifier crashed (status " + std::to_string(status) + ") on " + path;
    return out;
  }
  const json j = json::parse(bytes);
  out.finished = true;
  out.verdict = static_cast<Verdict>(j["verdict"].get<int>());
  out.first_kind = j["kind"];
  out.first_tensor = j["tensor"];
  out.text = j["text"];
  return out;
}

void expect_equivalent(const json& p, const std::string& stem) {
  const Outcome o = verify_bounded(p, stem);
  ASSERT_TRUE(o.finished) << stem << ": " << o.failure;
  EXPECT_EQ(o.verdict, Verdict::Equivalent) << stem << "\n" << o.text;
}

void expect_bug(const json& p, const std::string& stem, const std::string& tensor) {
  const Outcome o = verify_bounded(p, stem);
  ASSERT_TRUE(o.finished) << stem << ": " << o.failure;
  ASSERT_EQ(o.verdict, Verdict::NotEquivalent) << stem << "\n" << o.text;
  EXPECT_EQ(o.first_kind, "mismatch") << stem << "\n" << o.text;
  EXPECT_EQ(o.first_tensor, tensor) << stem << "\n" << o.text;
}

const char* kEps = "1/100000";

// ---------------------------------------------------------------------------
// Sequence parallelism: a row-parallel matmul leaves partial sums of h[8, 4];
// they are reduce-scattered along the sequence dim, rmsnorm runs on the local
// rows, and the rows are all-gathered back.
enum class SpVariant {
  Correct,
  ReversedGroups,
  GatherWrongOrder,
  ScatterHiddenDim,
  ScatterReshape
};

json sequence_parallel(SpVariant v) {
  Graph L;
  L.in("a", {8, 8}).in("wo", {8, 4}).in("g", {4});
  L.def("h", {8, 4}, "matmul", {"a", "wo"});
  L.def("y", {8, 4}, "rmsnorm", {"h", "g"}, {{"eps", kEps}});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    P.pin(r, R(r) + "a", {8, 4}, of("a", {{0, 8}, {4 * r, 4 * r + 4}}));
    P.pin(r, R(r) + "wo", {4, 4}, of("wo", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pdef(r, R(r) + "hp", {8, 4}, part("h", r, 2), "matmul", {R(r) + "a", R(r) + "wo"});
  }
  const bool reversed = v == SpVariant::ReversedGroups;
  const Group rs_group = reversed ? Group{1, 0} : Group{0, 1};
  const Group ag_group = (reversed || v == SpVariant::GatherWrongOrder) ? Group{1, 0} : Group{0, 1};
  Names rs_in, rs_out, ag_in, ag_out;
  for (int i = 0; i < 2; ++i) {
    rs_in.push_back(R(rs_group[i]) + "hp");
    rs_out.push_back(R(rs_group[i]) + "hs");
    ag_in.push_back(R(ag_group[i]) + "ys");
    ag_out.push_back(R(ag_group[i]) + "y");
  }
  if (v == SpVariant::ScatterHiddenDim) {
    // The partial sums are scattered along the hidden dim: every claim is
    // true except that rmsnorm over half a row is not rmsnorm over the row.
    for (int r = 0; r < 2; ++r) {
      P.t(R(r) + "hs", {8, 2}, of("h", {{0, 8}, {2 * r, 2 * r + 2}}), r);
      P.pin(r, R(r) + "g", {2}, of("g", {{2 * r, 2 * r + 2}}));
      P.pdef(r, R(r) + "ys", {8, 2}, of("y", {{0, 8}, {2 * r, 2 * r + 2}}), "rmsnorm",
             {R(r) + "hs", R(r) + "g"}, {{"eps", kEps}});
      P.t(R(r) + "y", {8, 4}, of("y"), r);
    }
    P.coll("reduce_scatter", rs_group, rs_in, rs_out, {{"dim", 1}});
    P.coll("all_gather", ag_group, ag_in, ag_out, {{"dim", 1}});
  } else {
    for (int r = 0; r < 2; ++r) {
      // Under reversed groups rank 1 holds piece 0 (output i is on group[i]).
      const int piece = reversed ? 1 - r : r;
      const Ranges rows = {{4 * piece, 4 * piece + 4}, {0, 4}};
      P.pin(r, R(r) + "g", {4}, of("g"));
      if (v == SpVariant::ScatterReshape) {
        // Scattered along the hidden dim, then "fixed" by a reshape.
        P.t(R(r) + "hs.raw", {8, 2}, nullptr, r);
        P.pdef(r, R(r) + "hs", {4, 4}, of("h", rows), "reshape", {R(r) + "hs.raw"},
               {{"shape", {4, 4}}});
      } else {
        P.t(R(r) + "hs", {4, 4}, of("h", rows), r);
      }
      P.pdef(r, R(r) + "ys", {4, 4}, of("y", rows), "rmsnorm", {R(r) + "hs", R(r) + "g"},
             {{"eps", kEps}});
      P.t(R(r) + "y", {8, 4}, of("y"), r);
    }
    if (v == SpVariant::ScatterReshape) {
      P.coll("reduce_scatter", rs_group, rs_in, {R(0) + "hs.raw", R(1) + "hs.raw"}, {{"dim", 1}});
    } else {
      P.coll("reduce_scatter", rs_group, rs_in, rs_out, {{"dim", 0}});
    }
    P.coll("all_gather", ag_group, ag_in, ag_out, {{"dim", 0}});
  }
  P.out({R(0) + "y", R(1) + "y"});
  return plan(L, P);
}

TEST(ContractPlans, SequenceParallelRmsnorm) {
  expect_equivalent(sequence_parallel(SpVariant::Correct), "sp");
  // Looks wrong, is right: both collectives list the group as [1, 0], so
  // rank 1 holds rows 0..4 and the gather still concatenates them first.
  expect_equivalent(sequence_parallel(SpVariant::ReversedGroups), "sp-reversed");
}

TEST(ContractPlans, SequenceParallelAllGatherWrongGroupOrder) {
  expect_bug(sequence_parallel(SpVariant::GatherWrongOrder), "sp-gather-order", "y");
}

TEST(ContractPlans, SequenceParallelReduceScatterWrongDim) {
  expect_bug(sequence_parallel(SpVariant::ScatterHiddenDim), "sp-scatter-dim", "y");
  expect_bug(sequence_parallel(SpVariant::ScatterReshape), "sp-scatter-reshape", "h");
}

// ---------------------------------------------------------------------------
// ZeRO: data-parallel gradients of w[4, 4] are reduce-scattered by rows, the
// optimizer updates the local rows of w (and of Adam's m, v), and the updated
// weights are all-gathered.
struct ZeroOptions {
  bool adam = false;
  std::string scatter_reduce = "sum";
  int rank1_weight_rows = 2;  // first row of rank 1's weight shard (2 is right)
  int rank1_step = 3;
  Group gather_group = {0, 1};
};

json zero(const ZeroOptions& o) {
  json sgd = {{"lr", "1/100"}};
  json adam = {{"lr", "1/1000"},       {"beta1", "9/10"}, {"beta2", "999/1000"},
               {"eps", "1/100000000"}, {"step", 3},       {"weight_decay", "1/100"}};
  Graph L;
  L.in("x", {8, 4}).in("dy", {8, 4}).in("w", {4, 4});
  L.def("gw", {4, 4}, "matmul", {"x", "dy"}, {{"transpose_a", true}});
  if (o.adam) {
    L.in("m", {4, 4}).in("v", {4, 4});
    L.t("w.next", {4, 4}).t("m.next", {4, 4}).t("v.next", {4, 4});
    L.op("adam", {"w", "gw", "m", "v"}, {"w.next", "m.next", "v.next"}, adam);
    L.out({"w.next", "m.next", "v.next"});
  } else {
    L.def("w.next", {4, 4}, "sgd", {"w", "gw"}, sgd);
    L.out({"w.next"});
  }

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges rows = {{2 * r, 2 * r + 2}, {0, 4}};
    const int wrow = r == 1 ? o.rank1_weight_rows : 0;
    P.pin(r, p + "x", {4, 4}, of("x", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "dy", {4, 4}, of("dy", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "w", {2, 4}, of("w", {{wrow, wrow + 2}, {0, 4}}));
    P.pdef(r, p + "gp", {4, 4}, part("gw", r, 2), "matmul", {p + "x", p + "dy"},
           {{"transpose_a", true}});
    P.t(p + "gs", {2, 4}, of("gw", rows), r);
    P.t(p + "ws.next", {2, 4}, of("w.next", rows), r);
    if (o.adam) {
      P.pin(r, p + "m", {2, 4}, of("m", rows));
      P.pin(r, p + "v", {2, 4}, of("v", rows));
      P.t(p + "m.next", {2, 4}, of("m.next", rows), r);
      P.t(p + "v.next", {2, 4}, of("v.next", rows), r);
      json a = adam;
      if (r == 1) a["step"] = o.rank1_step;
      P.op("adam", {p + "w", p + "gs", p + "m", p + "v"},
           {p + "ws.next", p + "m.next", p + "v.next"}, a);
      P.out({p + "m.next", p + "v.next"});
    } else {
      P.op("sgd", {p + "w", p + "gs"}, {p + "ws.next"}, sgd);
    }
    P.t(p + "w.next", {4, 4}, of("w.next"), r);
    P.out({p + "w.next"});
  }
  P.coll("reduce_scatter", {0, 1}, {"r0.gp", "r1.gp"}, {"r0.gs", "r1.gs"},
         {{"dim", 0}, {"reduce", o.scatter_reduce}});
  Names ag_in, ag_out;
  for (int r : o.gather_group) {
    ag_in.push_back(R(r) + "ws.next");
    ag_out.push_back(R(r) + "w.next");
  }
  P.coll("all_gather", o.gather_group, ag_in, ag_out, {{"dim", 0}});
  return plan(L, P);
}

TEST(ContractPlans, ZeroShardedSgd) {
  expect_equivalent(zero({}), "zero-sgd");
  ZeroOptions mean;
  mean.scatter_reduce = "mean";  // gradients averaged where the logical graph sums
  expect_bug(zero(mean), "zero-sgd-mean", "gw");
  ZeroOptions shard;
  shard.rank1_weight_rows = 0;  // rank 1 updates a copy of rank 0's rows
  expect_bug(zero(shard), "zero-sgd-shard", "w.next");
  ZeroOptions order;
  order.gather_group = {1, 0};
  expect_bug(zero(order), "zero-sgd-gather-order", "w.next");
}

TEST(ContractPlans, ZeroShardedAdam) {
  ZeroOptions good;
  good.adam = true;
  expect_equivalent(zero(good), "zero-adam");
  ZeroOptions step = good;
  step.rank1_step = 2;  // stale bias correction on one rank: only p' differs
  expect_bug(zero(step), "zero-adam-step", "w.next");
  ZeroOptions order = good;
  order.gather_group = {1, 0};
  expect_bug(zero(order), "zero-adam-gather-order", "w.next");
}

// ---------------------------------------------------------------------------
// Expert parallelism: x[expert 2, token 4, d 4], rank r owns tokens 2r..2r+2
// for every expert and expert r's weights. Dispatch: all_to_all splitting the
// expert dim, concatenating tokens; combine: the reverse.
json expert_parallel(bool swapped_dispatch) {
  Graph L;
  L.in("x", {2, 4, 4}).in("we", {2, 4, 4});
  L.def("y", {2, 4, 4}, "matmul", {"x", "we"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {2, 2, 4}, of("x", {{0, 2}, {2 * r, 2 * r + 2}, {0, 4}}));
    P.pin(r, p + "we", {1, 4, 4}, of("we", {{r, r + 1}, {0, 4}, {0, 4}}));
    P.t(p + "xe", {1, 4, 4}, of("x", {{r, r + 1}, {0, 4}, {0, 4}}), r);
    if (swapped_dispatch) {
      // split/concat swapped; the shape is then patched with a reshape.
      P.t(p + "xe.raw", {4, 1, 4}, nullptr, r);
      P.op("reshape", {p + "xe.raw"}, {p + "xe"}, {{"shape", {1, 4, 4}}});
    }
    P.pdef(r, p + "ye", {1, 4, 4}, of("y", {{r, r + 1}, {0, 4}, {0, 4}}), "matmul",
           {p + "xe", p + "we"});
    P.t(p + "y", {2, 2, 4}, of("y", {{0, 2}, {2 * r, 2 * r + 2}, {0, 4}}), r);
  }
  if (swapped_dispatch)
    P.coll("all_to_all", {0, 1}, {"r0.x", "r1.x"}, {"r0.xe.raw", "r1.xe.raw"},
           {{"split_dim", 1}, {"concat_dim", 0}});
  else
    P.coll("all_to_all", {0, 1}, {"r0.x", "r1.x"}, {"r0.xe", "r1.xe"},
           {{"split_dim", 0}, {"concat_dim", 1}});
  // Combine, with negative dims: split tokens (-2), concatenate experts (-3).
  P.coll("all_to_all", {0, 1}, {"r0.ye", "r1.ye"}, {"r0.y", "r1.y"},
         {{"split_dim", -2}, {"concat_dim", -3}});
  P.out({"r0.y", "r1.y"});
  return plan(L, P);
}

TEST(ContractPlans, ExpertParallelAllToAll) {
  expect_equivalent(expert_parallel(false), "ep");
  expect_bug(expert_parallel(true), "ep-swapped", "x");
}

// ---------------------------------------------------------------------------
// Broadcast: w lives on rank 2 only; ranks 0 and 1 receive into a zero buffer.
// `root` indexes the group, it is not a rank.
json broadcast(const Group& group, int root) {
  Graph L;
  L.in("x", {6, 4}).in("w", {4, 4});
  L.def("y", {6, 4}, "matmul", {"x", "w"});
  L.out({"y"});

  Graph P(3);
  Names in, out;
  for (int r = 0; r < 3; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {2, 4}, of("x", {{2 * r, 2 * r + 2}, {0, 4}}));
    if (r == 2)
      P.pin(r, p + "w.src", {4, 4}, of("w"));
    else
      P.pdef(r, p + "w.src", {4, 4}, nullptr, "const", {},
             {{"value", 0}, {"shape", {4, 4}}, {"dtype", "f32"}});
    P.t(p + "w", {4, 4}, of("w"), r);
    P.pdef(r, p + "y", {2, 4}, of("y", {{2 * r, 2 * r + 2}, {0, 4}}), "matmul", {p + "x", p + "w"});
    P.out({p + "y"});
  }
  for (int r : group) {
    in.push_back(R(r) + "w.src");
    out.push_back(R(r) + "w");
  }
  P.coll("broadcast", group, in, out, {{"root", root}});
  return plan(L, P);
}

TEST(ContractPlans, BroadcastFromRoot) {
  expect_equivalent(broadcast({0, 1, 2}, 2), "bcast");
  expect_equivalent(broadcast({2, 0, 1}, 0), "bcast-group-order");
  expect_bug(broadcast({0, 1, 2}, 0), "bcast-wrong-root", "w");
  // root given as the rank number instead of its index in the group.
  expect_bug(broadcast({2, 0, 1}, 2), "bcast-root-as-rank", "w");
}

// ---------------------------------------------------------------------------
// Pipeline: stage 0 (rank 0) computes a = relu(x @ w1) per micro-batch and
// sends it to stage 1 (rank 1), which computes y = a @ w2.
enum class PpBug { None, SendPreActivation, SendWrongMicrobatch };

json pipeline(PpBug bug, bool claim_received) {
  Graph L;
  L.in("x", {4, 4}).in("w1", {4, 4}).in("w2", {4, 4});
  L.def("h", {4, 4}, "matmul", {"x", "w1"});
  L.def("a", {4, 4}, "relu", {"h"});
  L.def("y", {4, 4}, "matmul", {"a", "w2"});
  L.out({"y"});

  Graph P(2);
  P.pin(0, "s0.w1", {4, 4}, of("w1"));
  P.pin(1, "s1.w2", {4, 4}, of("w2"));
  for (int m = 0; m < 2; ++m) {
    const std::string mb = "mb" + std::to_string(m) + ".";
    const Ranges rows = {{2 * m, 2 * m + 2}, {0, 4}};
    P.pin(0, "s0." + mb + "x", {2, 4}, of("x", rows));
    P.pdef(0, "s0." + mb + "h", {2, 4}, nullptr, "matmul", {"s0." + mb + "x", "s0.w1"});
    P.pdef(0, "s0." + mb + "a", {2, 4}, nullptr, "relu", {"s0." + mb + "h"});
    P.t("s1." + mb + "a", {2, 4}, claim_received ? of("a", rows) : json(), 1);
    std::string sent = "s0." + mb + "a";
    if (bug == PpBug::SendPreActivation) sent = "s0." + mb + "h";
    if (bug == PpBug::SendWrongMicrobatch && m == 1) sent = "s0.mb0.a";
    P.coll("send", {0, 1}, {sent}, {"s1." + mb + "a"});
    P.pdef(1, "s1." + mb + "y", {2, 4}, of("y", rows), "matmul", {"s1." + mb + "a", "s1.w2"});
    P.out({"s1." + mb + "y"});
  }
  return plan(L, P);
}

TEST(ContractPlans, PipelineSend) {
  expect_equivalent(pipeline(PpBug::None, true), "pp");
  expect_equivalent(pipeline(PpBug::None, false), "pp-noclaim");
  expect_bug(pipeline(PpBug::SendPreActivation, true), "pp-preact", "a");
  expect_bug(pipeline(PpBug::SendPreActivation, false), "pp-preact-noclaim", "y");
  expect_bug(pipeline(PpBug::SendWrongMicrobatch, true), "pp-microbatch", "a");
}

// ---------------------------------------------------------------------------
// Vocabulary-parallel embedding: table[8, 4] rows split over 2 ranks; each
// rank looks up the ids it owns (others masked to row 0 and zeroed), the
// partial rows are summed by all_reduce.
enum class VocabBug { None, NoMask, OffByOneRange };

json vocab_embedding(VocabBug bug) {
  Graph L;
  L.in("ids", {2, 3}, "i64").in("table", {8, 4});
  L.def("e", {2, 3, 4}, "embedding", {"ids", "table"});
  L.out({"e"});

  Graph P(2);
  Names parts, full;
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const int lo = 4 * r;
    const int hi = (bug == VocabBug::OffByOneRange && r == 0) ? 3 : 4 * r + 4;
    auto ci = [&](const std::string& n, int value) {
      P.pdef(r, p + n, {2, 3}, nullptr, "const", {}, {{"value", value}, {"shape", {2, 3}}}, "i64");
    };
    P.pin(r, p + "ids", {2, 3}, of("ids"), "i64");
    P.pin(r, p + "table", {4, 4}, of("table", {{lo, 4 * r + 4}, {0, 4}}));
    ci("lo", lo);
    ci("hi", hi);
    ci("zero", 0);
    P.pdef(r, p + "ge", {2, 3}, nullptr, "ge", {p + "ids", p + "lo"}, obj(), "bool");
    P.pdef(r, p + "lt", {2, 3}, nullptr, "lt", {p + "ids", p + "hi"}, obj(), "bool");
    // ge && lt, written with where.
    P.pdef(r, p + "own", {2, 3}, nullptr, "where", {p + "ge", p + "lt", p + "ge"}, obj(), "bool");
    P.pdef(r, p + "local", {2, 3}, nullptr, "sub", {p + "ids", p + "lo"}, obj(), "i64");
    P.pdef(r, p + "safe", {2, 3}, nullptr, "where", {p + "own", p + "local", p + "zero"}, obj(),
           "i64");
    const json claim = part("e", r, 2);
    if (bug == VocabBug::NoMask) {
      P.pdef(r, p + "part", {2, 3, 4}, claim, "embedding", {p + "safe", p + "table"});
    } else {
      P.pdef(r, p + "rows", {2, 3, 4}, nullptr, "embedding", {p + "safe", p + "table"});
      P.pdef(r, p + "ownf", {2, 3}, nullptr, "cast", {p + "own"}, {{"dtype", "f32"}});
      P.pdef(r, p + "ownf3", {2, 3, 1}, nullptr, "reshape", {p + "ownf"}, {{"shape", {2, 3, 1}}});
      P.pdef(r, p + "part", {2, 3, 4}, claim, "mul", {p + "rows", p + "ownf3"});
    }
    P.t(p + "e", {2, 3, 4}, of("e"), r);
    parts.push_back(p + "part");
    full.push_back(p + "e");
  }
  P.coll("all_reduce", {0, 1}, parts, full, {{"reduce", "sum"}});
  P.out(full);
  return plan(L, P);
}

TEST(ContractPlans, VocabParallelEmbedding) {
  expect_equivalent(vocab_embedding(VocabBug::None), "vocab");
  expect_bug(vocab_embedding(VocabBug::NoMask), "vocab-nomask", "e");
  expect_bug(vocab_embedding(VocabBug::OffByOneRange), "vocab-range", "e");
}

// ---------------------------------------------------------------------------
// Cross entropy: loss = -mean(gather(log_softmax(logits), labels)), rows
// split over 2 data-parallel ranks.
enum class CeVariant { SumThenScale, MeanOfMeans, MeanThenSum, WrongLabelShard };

json cross_entropy(CeVariant v) {
  Graph L;
  L.in("logits", {4, 8}).in("labels", {4, 1}, "i64");
  L.def("lsm", {4, 8}, "log_softmax", {"logits"}, {{"dim", -1}});
  L.def("picked", {4, 1}, "gather", {"lsm", "labels"}, {{"dim", 1}});
  L.def("avg", {}, "mean", {"picked"});
  L.def("loss", {}, "neg", {"avg"});
  L.out({"loss"});

  Graph P(2);
  Names parts, full;
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const int lr = (v == CeVariant::WrongLabelShard) ? 0 : 2 * r;
    P.pin(r, p + "logits", {2, 8}, of("logits", {{2 * r, 2 * r + 2}, {0, 8}}));
    P.pin(r, p + "labels", {2, 1}, of("labels", {{lr, lr + 2}, {0, 1}}), "i64");
    P.pdef(r, p + "lsm", {2, 8}, of("lsm", {{2 * r, 2 * r + 2}, {0, 8}}), "log_softmax",
           {p + "logits"}, {{"dim", 1}});
    P.pdef(r, p + "picked", {2, 1}, nullptr, "gather", {p + "lsm", p + "labels"}, {{"dim", -1}});
    if (v == CeVariant::SumThenScale) {
      P.pdef(r, p + "sum", {}, nullptr, "sum", {p + "picked"}, {{"dims", {0, 1}}});
      P.pdef(r, p + "part", {}, part("loss", r, 2), "scale", {p + "sum"}, {{"factor", "-1/4"}});
    } else {
      P.pdef(r, p + "mean", {}, nullptr, "mean", {p + "picked"});
      P.pdef(r, p + "part", {}, nullptr, "neg", {p + "mean"});
    }
    P.t(p + "loss", {}, of("loss"), r);
    parts.push_back(p + "part");
    full.push_back(p + "loss");
  }
  const std::string reduce = v == CeVariant::MeanOfMeans ? "mean" : "sum";
  P.coll("all_reduce", {0, 1}, parts, full, {{"reduce", reduce}});
  P.out(full);
  return plan(L, P);
}

TEST(ContractPlans, CrossEntropyLogSoftmaxGather) {
  expect_equivalent(cross_entropy(CeVariant::SumThenScale), "ce");
  // Looks wrong, is right: equal shards, so the mean of the local means is the mean.
  expect_equivalent(cross_entropy(CeVariant::MeanOfMeans), "ce-mean-of-means");
  expect_bug(cross_entropy(CeVariant::MeanThenSum), "ce-mean-sum", "loss");
  expect_bug(cross_entropy(CeVariant::WrongLabelShard), "ce-labels", "loss");
}

// Vocabulary-parallel log_softmax: logits columns split; global max and sum
// of exponentials by all_reduce max / sum.
enum class VlsmBug { None, SumReducedByMax, LocalMax };

json vocab_log_softmax(VlsmBug bug) {
  Graph L;
  L.in("logits", {4, 8});
  L.def("lsm", {4, 8}, "log_softmax", {"logits"}, {{"dim", 1}});
  L.out({"lsm"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {4, 4}, of("logits", {{0, 4}, {4 * r, 4 * r + 4}}));
    P.pdef(r, p + "mx.local", {4, 1}, nullptr, "max", {p + "x"},
           {{"dims", {1}}, {"keepdim", true}});
    P.t(p + "mx", {4, 1}, nullptr, r);
    const std::string mx = bug == VlsmBug::LocalMax ? p + "mx.local" : p + "mx";
    P.pdef(r, p + "d", {4, 4}, nullptr, "sub", {p + "x", mx});
    P.pdef(r, p + "e", {4, 4}, nullptr, "exp", {p + "d"});
    P.pdef(r, p + "s.local", {4, 1}, nullptr, "sum", {p + "e"},
           {{"dims", {-1}}, {"keepdim", true}});
    P.t(p + "s", {4, 1}, nullptr, r);
    P.pdef(r, p + "ls", {4, 1}, nullptr, "log", {p + "s"});
    P.pdef(r, p + "lsm", {4, 4}, of("lsm", {{0, 4}, {4 * r, 4 * r + 4}}), "sub",
           {p + "d", p + "ls"});
    P.out({p + "lsm"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.mx.local", "r1.mx.local"}, {"r0.mx", "r1.mx"},
         {{"reduce", "max"}});
  P.coll("all_reduce", {0, 1}, {"r0.s.local", "r1.s.local"}, {"r0.s", "r1.s"},
         {{"reduce", bug == VlsmBug::SumReducedByMax ? "max" : "sum"}});
  return plan(L, P);
}

TEST(ContractPlans, VocabParallelLogSoftmax) {
  expect_equivalent(vocab_log_softmax(VlsmBug::None), "vlsm");
  expect_bug(vocab_log_softmax(VlsmBug::SumReducedByMax), "vlsm-max", "lsm");
  expect_bug(vocab_log_softmax(VlsmBug::LocalMax), "vlsm-local-max", "lsm");
}

// ---------------------------------------------------------------------------
// Causal attention, query rows split over 2 ranks (context parallel for
// queries, full k and v on every rank); the mask is built from iota.
json causal_attention(int rank1_row_offset) {
  json neg = {{"value", -10000}, {"dtype", "f32"}};
  Graph L;
  L.in("q", {8, 4}).in("k", {8, 4}).in("v", {8, 4});
  L.def("sc", {8, 8}, "matmul", {"q", "k"}, {{"transpose_b", true}});
  L.def("row", {8, 8}, "iota", {}, {{"shape", {8, 8}}, {"dim", 0}}, "i64");
  L.def("col", {8, 8}, "iota", {}, {{"shape", {8, 8}}, {"dim", 1}}, "i64");
  L.def("mask", {8, 8}, "ge", {"row", "col"}, obj(), "bool");
  json nl = neg;
  nl["shape"] = {8, 8};
  L.def("neg", {8, 8}, "const", {}, nl);
  L.def("ms", {8, 8}, "where", {"mask", "sc", "neg"});
  L.def("p", {8, 8}, "softmax", {"ms"}, {{"dim", -1}});
  L.def("o", {8, 4}, "matmul", {"p", "v"});
  L.out({"o"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges rows = {{4 * r, 4 * r + 4}, {0, 8}};
    P.pin(r, p + "q", {4, 4}, of("q", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "k", {8, 4}, of("k"));
    P.pin(r, p + "v", {8, 4}, of("v"));
    P.pdef(r, p + "sc", {4, 8}, nullptr, "matmul", {p + "q", p + "k"}, {{"transpose_b", true}});
    P.pdef(r, p + "lrow", {4, 8}, nullptr, "iota", {}, {{"shape", {4, 8}}, {"dim", 0}}, "i64");
    P.pdef(r, p + "off", {4, 8}, nullptr, "const", {},
           {{"value", r == 0 ? 0 : rank1_row_offset}, {"shape", {4, 8}}}, "i64");
    P.pdef(r, p + "row", {4, 8}, nullptr, "add", {p + "lrow", p + "off"}, obj(), "i64");
    P.pdef(r, p + "col", {4, 8}, nullptr, "iota", {}, {{"shape", {4, 8}}, {"dim", -1}}, "i64");
    P.pdef(r, p + "mask", {4, 8}, nullptr, "le", {p + "col", p + "row"}, obj(), "bool");
    json np = neg;
    np["shape"] = {4, 8};
    P.pdef(r, p + "neg", {4, 8}, nullptr, "const", {}, np);
    P.pdef(r, p + "ms", {4, 8}, nullptr, "where", {p + "mask", p + "sc", p + "neg"});
    P.pdef(r, p + "p", {4, 8}, of("p", rows), "softmax", {p + "ms"}, {{"dim", 1}});
    P.pdef(r, p + "o", {4, 4}, of("o", {{4 * r, 4 * r + 4}, {0, 4}}), "matmul", {p + "p", p + "v"});
    P.out({p + "o"});
  }
  return plan(L, P);
}

TEST(ContractPlans, CausalAttentionIotaMask) {
  expect_equivalent(causal_attention(4), "causal");
  expect_bug(causal_attention(2), "causal-offset2", "p");
  expect_bug(causal_attention(3), "causal-offset3", "p");
  expect_bug(causal_attention(5), "causal-offset5", "p");
}

// ---------------------------------------------------------------------------
// Multi-head attention, heads split over 2 ranks: [b, s, h*d] -> [b, s, h, d]
// -> [b, h, s, d]; rank r computes head r and a row-parallel output projection.
enum class MhaBug { None, TransposedQuery, WrongWoShard, MeanReduce };

json multi_head_attention(MhaBug bug) {
  Graph L;
  L.in("x", {1, 4, 8}).in("wq", {8, 8}).in("wk", {8, 8}).in("wv", {8, 8}).in("wo", {8, 8});
  for (std::string n : {"q", "k", "v"}) {
    L.def(n, {1, 4, 8}, "matmul", {"x", "w" + n});
    L.def(n + "h", {1, 4, 2, 4}, "reshape", {n}, {{"shape", {1, 4, 2, 4}}});
    L.def(n + "t", {1, 2, 4, 4}, "transpose", {n + "h"}, {{"perm", {0, 2, 1, 3}}});
  }
  L.def("sc", {1, 2, 4, 4}, "matmul", {"qt", "kt"}, {{"transpose_b", true}});
  L.def("scs", {1, 2, 4, 4}, "scale", {"sc"}, {{"factor", "1/2"}});
  L.def("p", {1, 2, 4, 4}, "softmax", {"scs"}, {{"dim", -1}});
  L.def("o", {1, 2, 4, 4}, "matmul", {"p", "vt"});
  L.def("ot", {1, 4, 2, 4}, "transpose", {"o"}, {{"perm", {0, 2, 1, 3}}});
  L.def("o2", {1, 4, 8}, "reshape", {"ot"}, {{"shape", {1, 4, 8}}});
  L.def("out", {1, 4, 8}, "matmul", {"o2", "wo"});
  L.out({"out"});

  Graph P(2);
  Names parts, full;
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges head = {{0, 1}, {r, r + 1}, {0, 4}, {0, 4}};
    P.pin(r, p + "x", {1, 4, 8}, of("x"));
    for (std::string n : {"q", "k", "v"}) {
      P.pin(r, p + "w" + n, {8, 4}, of("w" + n, {{0, 8}, {4 * r, 4 * r + 4}}));
      P.pdef(r, p + n, {1, 4, 4}, nullptr, "matmul", {p + "x", p + "w" + n});
      P.pdef(r, p + n + "h", {1, 4, 1, 4}, nullptr, "reshape", {p + n}, {{"shape", {1, 4, 1, 4}}});
      json perm = {0, 2, 1, 3};
      if (bug == MhaBug::TransposedQuery && n == "q" && r == 1) perm = {0, 2, 3, 1};
      P.pdef(r, p + n + "t", {1, 1, 4, 4}, of(n + "t", head), "transpose", {p + n + "h"},
             {{"perm", perm}});
    }
    P.pdef(r, p + "sc", {1, 1, 4, 4}, nullptr, "matmul", {p + "qt", p + "kt"},
           {{"transpose_b", true}});
    P.pdef(r, p + "scs", {1, 1, 4, 4}, nullptr, "scale", {p + "sc"}, {{"factor", "1/2"}});
    P.pdef(r, p + "p", {1, 1, 4, 4}, of("p", head), "softmax", {p + "scs"}, {{"dim", 3}});
    P.pdef(r, p + "o", {1, 1, 4, 4}, nullptr, "matmul", {p + "p", p + "vt"});
    P.pdef(r, p + "ot", {1, 4, 1, 4}, nullptr, "transpose", {p + "o"}, {{"perm", {0, 2, 1, 3}}});
    P.pdef(r, p + "o2", {1, 4, 4}, of("o2", {{0, 1}, {0, 4}, {4 * r, 4 * r + 4}}), "reshape",
           {p + "ot"}, {{"shape", {1, 4, 4}}});
    const int wo_row = (bug == MhaBug::WrongWoShard && r == 1) ? 0 : 4 * r;
    P.pin(r, p + "wo", {4, 8}, of("wo", {{wo_row, wo_row + 4}, {0, 8}}));
    P.pdef(r, p + "part", {1, 4, 8}, part("out", r, 2), "matmul", {p + "o2", p + "wo"});
    P.t(p + "out", {1, 4, 8}, of("out"), r);
    parts.push_back(p + "part");
    full.push_back(p + "out");
  }
  P.coll("all_reduce", {0, 1}, parts, full,
         {{"reduce", bug == MhaBug::MeanReduce ? "mean" : "sum"}});
  P.out(full);
  return plan(L, P);
}

TEST(ContractPlans, MultiHeadAttentionTensorParallelHeads) {
  expect_equivalent(multi_head_attention(MhaBug::None), "mha");
  expect_bug(multi_head_attention(MhaBug::TransposedQuery), "mha-transposed-q", "qt");
  expect_bug(multi_head_attention(MhaBug::WrongWoShard), "mha-wo-shard", "out");
  expect_bug(multi_head_attention(MhaBug::MeanReduce), "mha-mean", "out");
}

// ---------------------------------------------------------------------------
// layernorm followed by a mean loss, rows split over 2 data-parallel ranks.
json layernorm_loss(const std::string& factor) {
  Graph L;
  L.in("x", {4, 8}).in("w", {8}).in("b", {8});
  L.def("y", {4, 8}, "layernorm", {"x", "w", "b"}, {{"eps", kEps}});
  L.def("loss", {}, "mean", {"y"});
  L.out({"loss"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {2, 8}, of("x", {{2 * r, 2 * r + 2}, {0, 8}}));
    P.pin(r, p + "w", {8}, of("w"));
    P.pin(r, p + "b", {8}, of("b"));
    P.pdef(r, p + "y", {2, 8}, of("y", {{2 * r, 2 * r + 2}, {0, 8}}), "layernorm",
           {p + "x", p + "w", p + "b"}, {{"eps", kEps}});
    P.pdef(r, p + "s", {}, nullptr, "sum", {p + "y"});
    P.pdef(r, p + "part", {}, part("loss", r, 2), "scale", {p + "s"}, {{"factor", factor}});
    P.t(p + "loss", {}, of("loss"), r);
    P.out({p + "loss"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.part", "r1.part"}, {"r0.loss", "r1.loss"});
  return plan(L, P);
}

TEST(ContractPlans, LayernormMeanLoss) {
  expect_equivalent(layernorm_loss("1/32"), "ln-loss");
  expect_bug(layernorm_loss("1/16"), "ln-loss-local-count", "loss");
}

// layernorm with the hidden dim split over 2 ranks, written out by hand:
// mean and variance from all-reduced partial sums.
enum class LnBug { None, LocalCount, VarianceOfX };

json hidden_parallel_layernorm(LnBug bug) {
  Graph L;
  L.in("x", {4, 8}).in("w", {8}).in("b", {8});
  L.def("y", {4, 8}, "layernorm", {"x", "w", "b"}, {{"eps", kEps}});
  L.out({"y"});

  Graph P(2);
  const std::string inv = bug == LnBug::LocalCount ? "1/4" : "1/8";
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges cols = {{4 * r, 4 * r + 4}};
    P.pin(r, p + "x", {4, 4}, of("x", {{0, 4}, {4 * r, 4 * r + 4}}));
    P.pin(r, p + "w", {4}, of("w", cols));
    P.pin(r, p + "b", {4}, of("b", cols));
    P.pdef(r, p + "s", {4, 1}, nullptr, "sum", {p + "x"}, {{"dims", {1}}, {"keepdim", true}});
    P.t(p + "S", {4, 1}, nullptr, r);
    P.pdef(r, p + "mu", {4, 1}, nullptr, "scale", {p + "S"}, {{"factor", inv}});
    P.pdef(r, p + "d", {4, 4}, nullptr, "sub", {p + "x", p + "mu"});
    P.pdef(r, p + "sq", {4, 4}, nullptr, "square", {bug == LnBug::VarianceOfX ? p + "x" : p + "d"});
    P.pdef(r, p + "ss", {4, 1}, nullptr, "sum", {p + "sq"}, {{"dims", {-1}}, {"keepdim", true}});
    P.t(p + "SS", {4, 1}, nullptr, r);
    P.pdef(r, p + "var", {4, 1}, nullptr, "scale", {p + "SS"}, {{"factor", "1/8"}});
    P.pdef(r, p + "eps", {4, 1}, nullptr, "const", {}, {{"value", kEps}, {"shape", {4, 1}}});
    P.pdef(r, p + "ve", {4, 1}, nullptr, "add", {p + "var", p + "eps"});
    P.pdef(r, p + "rs", {4, 1}, nullptr, "rsqrt", {p + "ve"});
    P.pdef(r, p + "n", {4, 4}, nullptr, "mul", {p + "d", p + "rs"});
    P.pdef(r, p + "nw", {4, 4}, nullptr, "mul", {p + "n", p + "w"});
    P.pdef(r, p + "y", {4, 4}, of("y", {{0, 4}, {4 * r, 4 * r + 4}}), "add", {p + "nw", p + "b"});
    P.out({p + "y"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.s", "r1.s"}, {"r0.S", "r1.S"});
  P.coll("all_reduce", {0, 1}, {"r0.ss", "r1.ss"}, {"r0.SS", "r1.SS"});
  return plan(L, P);
}

TEST(ContractPlans, HiddenParallelLayernormByHand) {
  expect_equivalent(hidden_parallel_layernorm(LnBug::None), "ln-hidden");
  expect_bug(hidden_parallel_layernorm(LnBug::LocalCount), "ln-hidden-count", "y");
  expect_bug(hidden_parallel_layernorm(LnBug::VarianceOfX), "ln-hidden-var", "y");
}

// ---------------------------------------------------------------------------
// Gradient accumulation: each data-parallel rank holds its own accumulator,
// given to the plan as additive parts of the logical accumulator gacc.
json grad_accumulation(bool add_after_reduce) {
  Graph L;
  L.in("gacc", {4, 4}).in("x", {8, 4}).in("dy", {8, 4}).in("w", {4, 4});
  L.def("gl", {4, 4}, "matmul", {"x", "dy"}, {{"transpose_a", true}});
  L.def("g", {4, 4}, "add", {"gacc", "gl"});
  L.def("w.next", {4, 4}, "sgd", {"w", "g"}, {{"lr", "1/10"}});
  L.out({"g", "w.next"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "gacc", {4, 4}, part("gacc", r, 2));
    P.pin(r, p + "x", {4, 4}, of("x", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "dy", {4, 4}, of("dy", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "w", {4, 4}, of("w"));
    P.pdef(r, p + "gl", {4, 4}, part("gl", r, 2), "matmul", {p + "x", p + "dy"},
           {{"transpose_a", true}});
    if (add_after_reduce) {
      P.t(p + "gl.full", {4, 4}, of("gl"), r);
      P.pdef(r, p + "g", {4, 4}, of("g"), "add", {p + "gl.full", p + "gacc"});
    } else {
      P.pdef(r, p + "gp", {4, 4}, part("g", r, 2), "add", {p + "gacc", p + "gl"});
      P.t(p + "g", {4, 4}, of("g"), r);
    }
    P.pdef(r, p + "w.next", {4, 4}, of("w.next"), "sgd", {p + "w", p + "g"}, {{"lr", "1/10"}});
    P.out({p + "g", p + "w.next"});
  }
  if (add_after_reduce)
    P.coll("all_reduce", {0, 1}, {"r0.gl", "r1.gl"}, {"r0.gl.full", "r1.gl.full"});
  else
    P.coll("all_reduce", {0, 1}, {"r0.gp", "r1.gp"}, {"r0.g", "r1.g"});
  return plan(L, P);
}

TEST(ContractPlans, GradientAccumulatorsAsInputParts) {
  expect_equivalent(grad_accumulation(false), "gacc");
  expect_bug(grad_accumulation(true), "gacc-after-reduce", "g");
}

// ---------------------------------------------------------------------------
// Parallel outputs that are parallel inputs: a frozen weight and a gradient
// accumulator (given as parts) pass through unchanged.
json pass_through(bool decay_frozen) {
  Graph L;
  L.in("x", {4, 4}).in("w", {4, 4}).in("gacc", {4, 4});
  L.def("y", {4, 4}, "matmul", {"x", "w"});
  L.out({"y", "w", "gacc"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {4, 4}, of("x"));
    P.pin(r, p + "w", {4, 2}, of("w", {{0, 4}, {2 * r, 2 * r + 2}}));
    P.pin(r, p + "gacc", {4, 4}, part("gacc", r, 2));
    P.pdef(r, p + "y", {4, 2}, of("y", {{0, 4}, {2 * r, 2 * r + 2}}), "matmul", {p + "x", p + "w"});
    if (decay_frozen && r == 1) {
      P.pdef(r, p + "w.out", {4, 2}, of("w", {{0, 4}, {2, 4}}), "scale", {p + "w"},
             {{"factor", "99/100"}});
      P.out({p + "y", p + "w.out", p + "gacc"});
    } else {
      P.out({p + "y", p + "w", p + "gacc"});
    }
  }
  return plan(L, P);
}

TEST(ContractPlans, InputsPassedThroughAsOutputs) {
  expect_equivalent(pass_through(false), "passthrough");
  expect_bug(pass_through(true), "passthrough-decayed", "w");
}

// ---------------------------------------------------------------------------
// Integer and boolean tensors with lineage: positions from iota, a bool
// "early" mask, a bool input mask; intermediate int/bool claims.
enum class IntBug { None, RowOffset, LimitOffByOne };

json int_bool_lineage(IntBug bug) {
  Graph L;
  L.in("x", {8, 4}).in("keep", {8, 4}, "bool");
  L.def("pos", {8, 4}, "iota", {}, {{"shape", {8, 4}}, {"dim", 0}}, "i64");
  L.def("lim", {8, 4}, "const", {}, {{"value", 5}, {"shape", {8, 4}}}, "i64");
  L.def("early", {8, 4}, "lt", {"pos", "lim"}, obj(), "bool");
  L.def("valid", {8, 4}, "where", {"keep", "early", "keep"}, obj(), "bool");
  L.def("cnt", {8, 4}, "cast", {"valid"}, {{"dtype", "i64"}}, "i64");
  L.def("zero", {8, 4}, "const", {}, {{"value", 0}, {"shape", {8, 4}}, {"dtype", "f32"}});
  L.def("y", {8, 4}, "where", {"valid", "x", "zero"});
  L.out({"y", "cnt"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges rows = {{4 * r, 4 * r + 4}, {0, 4}};
    const int off = (bug == IntBug::RowOffset && r == 1) ? 2 : 4 * r;
    P.pin(r, p + "x", {4, 4}, of("x", rows));
    P.pin(r, p + "keep", {4, 4}, of("keep", rows), "bool");
    P.pdef(r, p + "lpos", {4, 4}, nullptr, "iota", {}, {{"shape", {4, 4}}, {"dim", 0}}, "i64");
    P.pdef(r, p + "off", {4, 4}, nullptr, "const", {}, {{"value", off}, {"shape", {4, 4}}}, "i64");
    P.pdef(r, p + "pos", {4, 4}, of("pos", rows), "add", {p + "lpos", p + "off"}, obj(), "i64");
    P.pdef(r, p + "lim", {4, 4}, nullptr, "const", {}, {{"value", 5}, {"shape", {4, 4}}}, "i64");
    const std::string cmp = (bug == IntBug::LimitOffByOne && r == 1) ? "le" : "lt";
    P.pdef(r, p + "early", {4, 4}, of("early", rows), cmp, {p + "pos", p + "lim"}, obj(), "bool");
    P.pdef(r, p + "valid", {4, 4}, of("valid", rows), "where",
           {p + "keep", p + "early", p + "keep"}, obj(), "bool");
    P.pdef(r, p + "cnt", {4, 4}, of("cnt", rows), "cast", {p + "valid"}, {{"dtype", "i32"}}, "i32");
    P.pdef(r, p + "zero", {4, 4}, nullptr, "const", {},
           {{"value", 0}, {"shape", {4, 4}}, {"dtype", "f32"}});
    P.pdef(r, p + "y", {4, 4}, of("y", rows), "where", {p + "valid", p + "x", p + "zero"});
    P.out({p + "y", p + "cnt"});
  }
  return plan(L, P);
}

TEST(ContractPlans, IntegerAndBoolLineage) {
  expect_equivalent(int_bool_lineage(IntBug::None), "intbool");
  expect_bug(int_bool_lineage(IntBug::RowOffset), "intbool-offset", "pos");
  expect_bug(int_bool_lineage(IntBug::LimitOffByOne), "intbool-limit", "early");
}

// cast to an integer is floor: floor(x + 1) = floor(x) + 1 for every real x
// (false for truncation toward zero at x = -1/2); floor(x + 1/2) != floor(x).
json floor_cast(const json& shift) {
  Graph L;
  L.in("x", {4, 4});
  L.def("one", {4, 4}, "const", {}, {{"value", shift}, {"shape", {4, 4}}, {"dtype", "f32"}});
  L.def("x1", {4, 4}, "add", {"x", "one"});
  L.def("c", {4, 4}, "cast", {"x1"}, {{"dtype", "i64"}}, "i64");
  L.out({"c"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges rows = {{2 * r, 2 * r + 2}, {0, 4}};
    P.pin(r, p + "x", {2, 4}, of("x", rows));
    P.pdef(r, p + "fx", {2, 4}, nullptr, "cast", {p + "x"}, {{"dtype", "i64"}}, "i64");
    P.pdef(r, p + "one", {2, 4}, nullptr, "const", {}, {{"value", 1}, {"shape", {2, 4}}}, "i64");
    P.pdef(r, p + "c", {2, 4}, of("c", rows), "add", {p + "fx", p + "one"}, obj(), "i64");
    P.out({p + "c"});
  }
  return plan(L, P);
}

TEST(ContractPlans, CastToIntegerIsFloor) {
  expect_equivalent(floor_cast(1), "floor");
  expect_bug(floor_cast("1/2"), "floor-half", "c");
}

// ---------------------------------------------------------------------------
// `map` functions: a gelu backward written with map{fn:"gelu'"} and a
// two-input map, columns split over 2 ranks.
enum class MapBug { None, WrongOperand, OtherFn, OpInsteadOfMap, SwappedArgs };

json map_functions(MapBug bug) {
  Graph L;
  L.in("h", {4, 8}).in("dy", {4, 8});
  L.def("gp", {4, 8}, "map", {"h"}, {{"fn", "gelu"}});
  L.def("dh", {4, 8}, "mul", {"dy", "gp"});
  L.def("z", {4, 8}, "map", {"h", "dy"}, {{"fn", "mix"}});
  L.out({"dh", "z"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges cols = {{0, 4}, {4 * r, 4 * r + 4}};
    P.pin(r, p + "h", {4, 4}, of("h", cols));
    P.pin(r, p + "dy", {4, 4}, of("dy", cols));
    const bool buggy = r == 1;
    if (buggy && bug == MapBug::WrongOperand)
      P.pdef(r, p + "gp", {4, 4}, nullptr, "map", {p + "dy"}, {{"fn", "gelu"}});
    else if (buggy && bug == MapBug::OtherFn)
      P.pdef(r, p + "gp", {4, 4}, nullptr, "map", {p + "h"}, {{"fn", "gelu'"}});
    else if (buggy && bug == MapBug::OpInsteadOfMap)
      P.pdef(r, p + "gp", {4, 4}, nullptr, "gelu", {p + "h"});
    else
      P.pdef(r, p + "gp", {4, 4}, nullptr, "map", {p + "h"}, {{"fn", "gelu"}});
    P.pdef(r, p + "dh", {4, 4}, of("dh", cols), "mul", {p + "gp", p + "dy"});
    const Names args =
        (buggy && bug == MapBug::SwappedArgs) ? Names{p + "dy", p + "h"} : Names{p + "h", p + "dy"};
    P.pdef(r, p + "z", {4, 4}, of("z", cols), "map", args, {{"fn", "mix"}});
    P.out({p + "dh", p + "z"});
  }
  return plan(L, P);
}

TEST(ContractPlans, MapFunctions) {
  expect_equivalent(map_functions(MapBug::None), "map");
  expect_bug(map_functions(MapBug::WrongOperand), "map-operand", "dh");
  expect_bug(map_functions(MapBug::OtherFn), "map-other-fn", "dh");
  // map{fn:"gelu"} is not the gelu op.
  expect_bug(map_functions(MapBug::OpInsteadOfMap), "map-vs-op", "dh");
  expect_bug(map_functions(MapBug::SwappedArgs), "map-swapped", "z");
}

// ---------------------------------------------------------------------------
// Division under claims: y = x / rowsum(x), columns split over 2 ranks; the
// row sum is all-reduced (claim on s) before dividing.
enum class DivVariant { Div, Reciprocal, LocalDenominator, ReduceReciprocals };

json row_normalize(DivVariant v) {
  Graph L;
  L.in("x", {4, 8});
  L.def("s", {4, 1}, "sum", {"x"}, {{"dims", {1}}, {"keepdim", true}});
  L.def("y", {4, 8}, "div", {"x", "s"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges cols = {{0, 4}, {4 * r, 4 * r + 4}};
    P.pin(r, p + "x", {4, 4}, of("x", cols));
    const json y = of("y", cols);
    if (v == DivVariant::ReduceReciprocals) {
      P.pdef(r, p + "s", {4, 1}, nullptr, "sum", {p + "x"}, {{"dims", {1}}, {"keepdim", true}});
      P.pdef(r, p + "rs", {4, 1}, nullptr, "reciprocal", {p + "s"});
      P.t(p + "RS", {4, 1}, nullptr, r);
      P.pdef(r, p + "y", {4, 4}, y, "mul", {p + "x", p + "RS"});
    } else {
      P.pdef(r, p + "s", {4, 1}, part("s", r, 2), "sum", {p + "x"},
             {{"dims", {1}}, {"keepdim", true}});
      P.t(p + "S", {4, 1}, of("s"), r);
      if (v == DivVariant::Div) {
        P.pdef(r, p + "y", {4, 4}, y, "div", {p + "x", p + "S"});
      } else if (v == DivVariant::LocalDenominator) {
        P.pdef(r, p + "y", {4, 4}, y, "div", {p + "x", p + "s"});
      } else {
        P.pdef(r, p + "inv", {4, 1}, nullptr, "reciprocal", {p + "S"});
        P.pdef(r, p + "y", {4, 4}, y, "mul", {p + "inv", p + "x"});
      }
    }
    P.out({p + "y"});
  }
  if (v == DivVariant::ReduceReciprocals)
    P.coll("all_reduce", {0, 1}, {"r0.rs", "r1.rs"}, {"r0.RS", "r1.RS"});
  else
    P.coll("all_reduce", {0, 1}, {"r0.s", "r1.s"}, {"r0.S", "r1.S"});
  return plan(L, P);
}

TEST(ContractPlans, DivisionUnderClaims) {
  expect_equivalent(row_normalize(DivVariant::Div), "div");
  expect_equivalent(row_normalize(DivVariant::Reciprocal), "div-reciprocal");
  expect_bug(row_normalize(DivVariant::LocalDenominator), "div-local", "y");
  expect_bug(row_normalize(DivVariant::ReduceReciprocals), "div-sum-of-reciprocals", "y");
}

// ---------------------------------------------------------------------------
// Row-parallel linear with a bias: the bias is added on rank 0 only before
// the all_reduce (looks like a missing bias, is right); on both ranks it is
// added twice.
json row_parallel_bias(bool bias_on_both) {
  Graph L;
  L.in("x", {4, 8}).in("w", {8, 4}).in("b", {4});
  L.def("h", {4, 4}, "matmul", {"x", "w"});
  L.def("y", {4, 4}, "add", {"h", "b"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {4, 4}, of("x", {{0, 4}, {4 * r, 4 * r + 4}}));
    P.pin(r, p + "w", {4, 4}, of("w", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "b", {4}, of("b"));
    if (r == 0 || bias_on_both) {
      P.pdef(r, p + "h", {4, 4}, nullptr, "matmul", {p + "x", p + "w"});
      P.pdef(r, p + "part", {4, 4}, part("y", r, 2), "add", {p + "h", p + "b"});
    } else {
      P.pdef(r, p + "part", {4, 4}, part("y", r, 2), "matmul", {p + "x", p + "w"});
    }
    P.t(p + "y", {4, 4}, of("y"), r);
    P.out({p + "y"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.part", "r1.part"}, {"r0.y", "r1.y"});
  return plan(L, P);
}

TEST(ContractPlans, BiasOnOneRankBeforeAllReduce) {
  expect_equivalent(row_parallel_bias(false), "bias-one-rank");
  expect_bug(row_parallel_bias(true), "bias-both-ranks", "y");
}

// ---------------------------------------------------------------------------
// A replicated input, sliced locally, transformed, gathered back.
json scatter_gather(int rank1_start) {
  Graph L;
  L.in("x", {8, 4});
  L.def("y", {8, 4}, "tanh", {"x"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const int start = r == 1 ? rank1_start : 0;
    P.pin(r, p + "x", {8, 4}, of("x"));
    P.pdef(r, p + "xs", {4, 4}, nullptr, "slice", {p + "x"},
           {{"dim", 0}, {"start", start}, {"end", start + 4}});
    P.pdef(r, p + "ys", {4, 4}, of("y", {{4 * r, 4 * r + 4}, {0, 4}}), "tanh", {p + "xs"});
    P.t(p + "y", {8, 4}, of("y"), r);
    P.out({p + "y"});
  }
  P.coll("all_gather", {0, 1}, {"r0.ys", "r1.ys"}, {"r0.y", "r1.y"}, {{"dim", 0}});
  return plan(L, P);
}

TEST(ContractPlans, ReplicatedInputScatteredThenGathered) {
  expect_equivalent(scatter_gather(4), "scatter-gather");
  expect_bug(scatter_gather(0), "scatter-gather-same-half", "y");
  expect_bug(scatter_gather(2), "scatter-gather-overlap", "y");
}

// ---------------------------------------------------------------------------
// A 2x2 mesh (dp x tp, rank = 2*d + t): weight gradients of a column-parallel
// layer are all-reduced over the data-parallel groups {0, 2} and {1, 3}.
json mesh_gradients(bool tp_groups) {
  Graph L;
  L.in("x", {8, 4}).in("dy", {8, 4});
  L.def("gw", {4, 4}, "matmul", {"x", "dy"}, {{"transpose_a", true}});
  L.out({"gw"});

  Graph P(4);
  for (int d = 0; d < 2; ++d)
    for (int t = 0; t < 2; ++t) {
      const int r = 2 * d + t;
      const std::string p = R(r);
      const Ranges cols = {{0, 4}, {2 * t, 2 * t + 2}};
      P.pin(r, p + "x", {4, 4}, of("x", {{4 * d, 4 * d + 4}, {0, 4}}));
      P.pin(r, p + "dy", {4, 2}, of("dy", {{4 * d, 4 * d + 4}, {2 * t, 2 * t + 2}}));
      P.pdef(r, p + "gp", {4, 2}, of("gw", cols, d, 2), "matmul", {p + "x", p + "dy"},
             {{"transpose_a", true}});
      P.t(p + "gw", {4, 2}, of("gw", cols), r);
      P.out({p + "gw"});
    }
  const std::vector<Group> groups =
      tp_groups ? std::vector<Group>{{0, 1}, {2, 3}} : std::vector<Group>{{0, 2}, {1, 3}};
  for (const Group& g : groups)
    P.coll("all_reduce", g, {R(g[0]) + "gp", R(g[1]) + "gp"}, {R(g[0]) + "gw", R(g[1]) + "gw"});
  return plan(L, P);
}

TEST(ContractPlans, MeshDataParallelGroups) {
  expect_equivalent(mesh_gradients(false), "mesh");
  expect_bug(mesh_gradients(true), "mesh-tp-groups", "gw");
}

// ---------------------------------------------------------------------------
// RoPE under sequence parallelism: position tables cos/sin are inputs sliced
// by rows like x. The logical model rotates half-split pairs (i, i + 4).
enum class RopeBug { None, PositionsNotOffset, InterleavedPairs };

json rope(RopeBug bug) {
  Graph L;
  L.in("x", {8, 8}).in("cos", {8, 8}).in("sin", {8, 8});
  L.def("x1", {8, 4}, "slice", {"x"}, {{"dim", 1}, {"start", 0}, {"end", 4}});
  L.def("x2", {8, 4}, "slice", {"x"}, {{"dim", -1}, {"start", 4}, {"end", 8}});
  L.def("nx2", {8, 4}, "neg", {"x2"});
  L.def("rot", {8, 8}, "concat", {"nx2", "x1"}, {{"dim", 1}});
  L.def("a", {8, 8}, "mul", {"x", "cos"});
  L.def("b", {8, 8}, "mul", {"rot", "sin"});
  L.def("y", {8, 8}, "add", {"a", "b"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const Ranges rows = {{4 * r, 4 * r + 4}, {0, 8}};
    const int pos = (bug == RopeBug::PositionsNotOffset && r == 1) ? 0 : 4 * r;
    P.pin(r, p + "x", {4, 8}, of("x", rows));
    P.pin(r, p + "cos", {4, 8}, of("cos", {{pos, pos + 4}, {0, 8}}));
    P.pin(r, p + "sin", {4, 8}, of("sin", {{pos, pos + 4}, {0, 8}}));
    if (bug == RopeBug::InterleavedPairs) {
      // GPT-J style pairs (2i, 2i + 1): not what the logical model does.
      P.pdef(r, p + "xp", {4, 4, 2}, nullptr, "reshape", {p + "x"}, {{"shape", {4, 4, 2}}});
      P.pdef(r, p + "ev", {4, 4, 1}, nullptr, "slice", {p + "xp"},
             {{"dim", 2}, {"start", 0}, {"end", 1}});
      P.pdef(r, p + "od", {4, 4, 1}, nullptr, "slice", {p + "xp"},
             {{"dim", 2}, {"start", 1}, {"end", 2}});
      P.pdef(r, p + "nod", {4, 4, 1}, nullptr, "neg", {p + "od"});
      P.pdef(r, p + "rotp", {4, 4, 2}, nullptr, "concat", {p + "nod", p + "ev"}, {{"dim", 2}});
      P.pdef(r, p + "rot", {4, 8}, nullptr, "reshape", {p + "rotp"}, {{"shape", {4, 8}}});
    } else {
      P.pdef(r, p + "x1", {4, 4}, nullptr, "slice", {p + "x"},
             {{"dim", 1}, {"start", 0}, {"end", 4}});
      P.pdef(r, p + "x2", {4, 4}, nullptr, "slice", {p + "x"},
             {{"dim", 1}, {"start", 4}, {"end", 8}});
      P.pdef(r, p + "nx2", {4, 4}, nullptr, "neg", {p + "x2"});
      P.pdef(r, p + "rot", {4, 8}, nullptr, "concat", {p + "nx2", p + "x1"}, {{"dim", -1}});
    }
    P.pdef(r, p + "a", {4, 8}, nullptr, "mul", {p + "cos", p + "x"});
    P.pdef(r, p + "b", {4, 8}, nullptr, "mul", {p + "rot", p + "sin"});
    P.pdef(r, p + "y", {4, 8}, of("y", rows), "add", {p + "a", p + "b"});
    P.out({p + "y"});
  }
  return plan(L, P);
}

TEST(ContractPlans, RotaryEmbeddingSequenceParallel) {
  expect_equivalent(rope(RopeBug::None), "rope");
  expect_bug(rope(RopeBug::PositionsNotOffset), "rope-positions", "y");
  expect_bug(rope(RopeBug::InterleavedPairs), "rope-interleaved", "y");
}

// ---------------------------------------------------------------------------
// Halo exchange: d = x[1:] - x[:-1] along the sequence; rank 1 needs rank 0's
// last row, sent by `send`.
json halo(int halo_row) {
  Graph L;
  L.in("x", {8, 4});
  L.def("hi", {7, 4}, "slice", {"x"}, {{"dim", 0}, {"start", 1}, {"end", 8}});
  L.def("lo", {7, 4}, "slice", {"x"}, {{"dim", 0}, {"start", 0}, {"end", 7}});
  L.def("d", {7, 4}, "sub", {"hi", "lo"});
  L.out({"d"});

  Graph P(2);
  P.pin(0, "r0.x", {4, 4}, of("x", {{0, 4}, {0, 4}}));
  P.pdef(0, "r0.hi", {3, 4}, nullptr, "slice", {"r0.x"}, {{"dim", 0}, {"start", 1}, {"end", 4}});
  P.pdef(0, "r0.lo", {3, 4}, nullptr, "slice", {"r0.x"}, {{"dim", 0}, {"start", 0}, {"end", 3}});
  P.pdef(0, "r0.d", {3, 4}, of("d", {{0, 3}, {0, 4}}), "sub", {"r0.hi", "r0.lo"});
  P.pdef(0, "r0.halo", {1, 4}, nullptr, "slice", {"r0.x"},
         {{"dim", 0}, {"start", halo_row}, {"end", halo_row + 1}});
  P.t("r1.halo", {1, 4}, nullptr, 1);
  P.coll("send", {0, 1}, {"r0.halo"}, {"r1.halo"});
  P.pin(1, "r1.x", {4, 4}, of("x", {{4, 8}, {0, 4}}));
  P.pdef(1, "r1.ext", {5, 4}, nullptr, "concat", {"r1.halo", "r1.x"}, {{"dim", 0}});
  P.pdef(1, "r1.hi", {4, 4}, nullptr, "slice", {"r1.ext"}, {{"dim", 0}, {"start", 1}, {"end", 5}});
  P.pdef(1, "r1.lo", {4, 4}, nullptr, "slice", {"r1.ext"}, {{"dim", 0}, {"start", 0}, {"end", 4}});
  P.pdef(1, "r1.d", {4, 4}, of("d", {{3, 7}, {0, 4}}), "sub", {"r1.hi", "r1.lo"});
  P.out({"r0.d", "r1.d"});
  return plan(L, P);
}

TEST(ContractPlans, HaloExchangeBySend) {
  expect_equivalent(halo(3), "halo");
  expect_bug(halo(0), "halo-first-row", "d");
  expect_bug(halo(2), "halo-off-by-one", "d");
}

// ---------------------------------------------------------------------------
// Fused QKV weight [4, 12] under tensor parallelism: each rank must take its
// columns of each of the q, k, v blocks; taking 6 contiguous columns is the
// classic fused-QKV sharding bug.
json fused_qkv(bool contiguous) {
  Graph L;
  L.in("x", {4, 4}).in("wqkv", {4, 12});
  L.def("qkv", {4, 12}, "matmul", {"x", "wqkv"});
  L.t("q", {4, 4}).t("k", {4, 4}).t("v", {4, 4});
  L.op("split", {"qkv"}, {"q", "k", "v"}, {{"dim", 1}, {"sizes", {4, 4, 4}}});
  L.def("qk", {4, 4}, "mul", {"q", "k"});
  L.def("y", {4, 4}, "add", {"qk", "v"});
  L.out({"y"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {4, 4}, of("x"));
    if (contiguous) {
      P.pin(r, p + "w", {4, 6}, of("wqkv", {{0, 4}, {6 * r, 6 * r + 6}}));
    } else {
      Names blocks;
      for (int b = 0; b < 3; ++b) {
        const std::string n = p + "w" + std::to_string(b);
        P.pin(r, n, {4, 2}, of("wqkv", {{0, 4}, {4 * b + 2 * r, 4 * b + 2 * r + 2}}));
        blocks.push_back(n);
      }
      P.pdef(r, p + "w", {4, 6}, nullptr, "concat", blocks, {{"dim", 1}});
    }
    P.pdef(r, p + "qkv", {4, 6}, nullptr, "matmul", {p + "x", p + "w"});
    P.t(p + "q", {4, 2}, nullptr, r).t(p + "k", {4, 2}, nullptr, r).t(p + "v", {4, 2}, nullptr, r);
    P.op("split", {p + "qkv"}, {p + "q", p + "k", p + "v"}, {{"dim", -1}, {"sizes", {2, 2, 2}}});
    P.pdef(r, p + "qk", {4, 2}, nullptr, "mul", {p + "q", p + "k"});
    P.pdef(r, p + "y", {4, 2}, of("y", {{0, 4}, {2 * r, 2 * r + 2}}), "add", {p + "qk", p + "v"});
    P.out({p + "y"});
  }
  return plan(L, P);
}

TEST(ContractPlans, FusedQkvSplit) {
  expect_equivalent(fused_qkv(false), "qkv");
  expect_bug(fused_qkv(true), "qkv-contiguous", "y");
}

// ---------------------------------------------------------------------------
// Heads laid out interleaved in the logical model ([b, s, d, h]); the
// contiguous tensor-parallel shard of the MHA plan is then wrong, while
// slicing the head out of the full projection is right.
json interleaved_heads(bool contiguous_shard) {
  Graph L;
  L.in("x", {1, 4, 8}).in("wq", {8, 8});
  L.def("q", {1, 4, 8}, "matmul", {"x", "wq"});
  L.def("qh", {1, 4, 4, 2}, "reshape", {"q"}, {{"shape", {1, 4, 4, 2}}});
  L.def("qt", {1, 2, 4, 4}, "transpose", {"qh"}, {{"perm", {0, 3, 1, 2}}});
  L.out({"qt"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {1, 4, 8}, of("x"));
    const json claim = of("qt", {{0, 1}, {r, r + 1}, {0, 4}, {0, 4}});
    if (contiguous_shard) {
      P.pin(r, p + "wq", {8, 4}, of("wq", {{0, 8}, {4 * r, 4 * r + 4}}));
      P.pdef(r, p + "q", {1, 4, 4}, nullptr, "matmul", {p + "x", p + "wq"});
      P.pdef(r, p + "qh", {1, 4, 1, 4}, nullptr, "reshape", {p + "q"}, {{"shape", {1, 4, 1, 4}}});
      P.pdef(r, p + "qt", {1, 1, 4, 4}, claim, "transpose", {p + "qh"}, {{"perm", {0, 2, 1, 3}}});
    } else {
      P.pin(r, p + "wq", {8, 8}, of("wq"));
      P.pdef(r, p + "q", {1, 4, 8}, nullptr, "matmul", {p + "x", p + "wq"});
      P.pdef(r, p + "qh", {1, 4, 4, 2}, nullptr, "reshape", {p + "q"}, {{"shape", {1, 4, 4, 2}}});
      P.pdef(r, p + "qr", {1, 4, 4, 1}, nullptr, "slice", {p + "qh"},
             {{"dim", 3}, {"start", r}, {"end", r + 1}});
      P.pdef(r, p + "qt", {1, 1, 4, 4}, claim, "transpose", {p + "qr"}, {{"perm", {0, 3, 1, 2}}});
    }
    P.out({p + "qt"});
  }
  return plan(L, P);
}

TEST(ContractPlans, InterleavedHeadLayout) {
  expect_equivalent(interleaved_heads(false), "heads-interleaved");
  expect_bug(interleaved_heads(true), "heads-contiguous-shard", "qt");
}

// ---------------------------------------------------------------------------
// Megatron vocabulary-parallel cross entropy: logits split by vocab columns;
// global max and sum of exponentials by all_reduce; the label's logit is
// gathered on the rank that owns it with a computed (masked) index.
enum class VceBug { None, OffByOneRange, NoMask };

json vocab_cross_entropy(VceBug bug) {
  Graph L;
  L.in("logits", {4, 8}).in("labels", {4, 1}, "i64");
  L.def("lsm", {4, 8}, "log_softmax", {"logits"}, {{"dim", 1}});
  L.def("picked", {4, 1}, "gather", {"lsm", "labels"}, {{"dim", 1}});
  L.def("avg", {}, "mean", {"picked"});
  L.def("loss", {}, "neg", {"avg"});
  L.out({"loss"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    const int lo = 4 * r;
    const int hi = (bug == VceBug::OffByOneRange && r == 1) ? 7 : 4 * r + 4;
    P.pin(r, p + "x", {4, 4}, of("logits", {{0, 4}, {4 * r, 4 * r + 4}}));
    P.pin(r, p + "labels", {4, 1}, of("labels"), "i64");
    P.pdef(r, p + "mx.local", {4, 1}, nullptr, "max", {p + "x"},
           {{"dims", {1}}, {"keepdim", true}});
    P.t(p + "mx", {4, 1}, nullptr, r);
    P.pdef(r, p + "d", {4, 4}, nullptr, "sub", {p + "x", p + "mx"});
    P.pdef(r, p + "e", {4, 4}, nullptr, "exp", {p + "d"});
    P.pdef(r, p + "s.local", {4, 1}, nullptr, "sum", {p + "e"}, {{"dims", {1}}, {"keepdim", true}});
    P.t(p + "s", {4, 1}, nullptr, r);
    P.pdef(r, p + "ls", {4, 1}, nullptr, "log", {p + "s"});
    auto ci = [&](const std::string& n, int value) {
      P.pdef(r, p + n, {4, 1}, nullptr, "const", {}, {{"value", value}, {"shape", {4, 1}}}, "i64");
    };
    ci("lo", lo);
    ci("hi", hi);
    ci("zero", 0);
    P.pdef(r, p + "ge", {4, 1}, nullptr, "ge", {p + "labels", p + "lo"}, obj(), "bool");
    P.pdef(r, p + "lt", {4, 1}, nullptr, "lt", {p + "labels", p + "hi"}, obj(), "bool");
    P.pdef(r, p + "own", {4, 1}, nullptr, "where", {p + "ge", p + "lt", p + "ge"}, obj(), "bool");
    P.pdef(r, p + "local", {4, 1}, nullptr, "sub", {p + "labels", p + "lo"}, obj(), "i64");
    P.pdef(r, p + "safe", {4, 1}, nullptr, "where", {p + "own", p + "local", p + "zero"}, obj(),
           "i64");
    if (bug == VceBug::NoMask) {
      P.pdef(r, p + "t", {4, 1}, nullptr, "gather", {p + "d", p + "safe"}, {{"dim", 1}});
    } else {
      P.pdef(r, p + "t.raw", {4, 1}, nullptr, "gather", {p + "d", p + "safe"}, {{"dim", 1}});
      P.pdef(r, p + "ownf", {4, 1}, nullptr, "cast", {p + "own"}, {{"dtype", "f32"}});
      P.pdef(r, p + "t", {4, 1}, nullptr, "mul", {p + "t.raw", p + "ownf"});
    }
    P.t(p + "T", {4, 1}, nullptr, r);
    P.pdef(r, p + "picked", {4, 1}, of("picked"), "sub", {p + "T", p + "ls"});
    P.pdef(r, p + "avg", {}, nullptr, "mean", {p + "picked"}, {{"dims", {0, 1}}});
    P.pdef(r, p + "loss", {}, of("loss"), "neg", {p + "avg"});
    P.out({p + "loss"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.mx.local", "r1.mx.local"}, {"r0.mx", "r1.mx"},
         {{"reduce", "max"}});
  P.coll("all_reduce", {0, 1}, {"r0.s.local", "r1.s.local"}, {"r0.s", "r1.s"});
  P.coll("all_reduce", {0, 1}, {"r0.t", "r1.t"}, {"r0.T", "r1.T"});
  return plan(L, P);
}

TEST(ContractPlans, VocabParallelCrossEntropy) {
  expect_equivalent(vocab_cross_entropy(VceBug::None), "vce");
  expect_bug(vocab_cross_entropy(VceBug::OffByOneRange), "vce-range", "picked");
  expect_bug(vocab_cross_entropy(VceBug::NoMask), "vce-nomask", "picked");
}

// ---------------------------------------------------------------------------
// Replicas: after the all_reduce every rank scales its copy of the gradient
// sum by 1/8 (the global batch). If one rank uses its local batch (1/4),
// only that replica is wrong, and the claim must still fail.
json replica_scaling(const std::string& rank1_factor) {
  Graph L;
  L.in("x", {8, 4}).in("dy", {8, 4});
  L.def("gs", {4, 4}, "matmul", {"x", "dy"}, {{"transpose_a", true}});
  L.def("g", {4, 4}, "scale", {"gs"}, {{"factor", "1/8"}});
  L.out({"g"});

  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const std::string p = R(r);
    P.pin(r, p + "x", {4, 4}, of("x", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pin(r, p + "dy", {4, 4}, of("dy", {{4 * r, 4 * r + 4}, {0, 4}}));
    P.pdef(r, p + "gp", {4, 4}, nullptr, "matmul", {p + "x", p + "dy"}, {{"transpose_a", true}});
    P.t(p + "gs", {4, 4}, nullptr, r);
    P.pdef(r, p + "g", {4, 4}, of("g"), "scale", {p + "gs"},
           {{"factor", r == 1 ? rank1_factor : std::string("1/8")}});
    P.out({p + "g"});
  }
  P.coll("all_reduce", {0, 1}, {"r0.gp", "r1.gp"}, {"r0.gs", "r1.gs"});
  return plan(L, P);
}

TEST(ContractPlans, EveryReplicaIsChecked) {
  expect_equivalent(replica_scaling("1/8"), "replica");
  expect_bug(replica_scaling("1/4"), "replica-one-wrong", "g");
}

// ---------------------------------------------------------------------------
// reduce_scatter with reduce max: y = maximum(a, b), a on rank 0, b on rank 1.
json scatter_max(const std::string& reduce) {
  Graph L;
  L.in("a", {4, 4}).in("b", {4, 4});
  L.def("y", {4, 4}, "maximum", {"a", "b"});
  L.out({"y"});
  Graph P(2);
  P.pin(0, "r0.a", {4, 4}, of("a"));
  P.pin(1, "r1.b", {4, 4}, of("b"));
  for (int r = 0; r < 2; ++r) {
    P.t(R(r) + "y", {2, 4}, of("y", {{2 * r, 2 * r + 2}, {0, 4}}), r);
    P.out({R(r) + "y"});
  }
  P.coll("reduce_scatter", {0, 1}, {"r0.a", "r1.b"}, {"r0.y", "r1.y"},
         {{"dim", 0}, {"reduce", reduce}});
  return plan(L, P);
}

TEST(ContractPlans, ReduceScatterMax) {
  expect_equivalent(scatter_max("max"), "rs-max");
  expect_bug(scatter_max("sum"), "rs-max-as-sum", "y");
  expect_bug(scatter_max("mean"), "rs-max-as-mean", "y");
}

// ---------------------------------------------------------------------------
// Rewrites that are identities over the reals (equivalent) and rewrites that
// need an identity of an uninterpreted function (not equivalent by contract:
// the proof must hold for any function). Rows of x[4, 4] split over 2 ranks;
// `body` builds y from x on either side (rank -1: logical).
using Body = void (*)(Graph&, int rank, const std::string& p, const json& claim);

void def_on(Graph& g, int rank, const std::string& name, const Dims& shape, const json& claim,
            const std::string& kind, const Names& in, json attrs = obj()) {
  if (rank < 0)
    g.def(name, shape, kind, in, attrs);
  else
    g.pdef(rank, name, shape, claim, kind, in, attrs);
}

json rewrite(Body logical, Body parallel) {
  Graph L;
  L.in("x", {4, 4}).in("z", {4, 4});
  logical(L, -1, "", nullptr);
  L.out({"y"});
  Graph P(2);
  for (int r = 0; r < 2; ++r) {
    const Ranges rows = {{2 * r, 2 * r + 2}, {0, 4}};
    P.pin(r, R(r) + "x", {2, 4}, of("x", rows));
    P.pin(r, R(r) + "z", {2, 4}, of("z", rows));
    parallel(P, r, R(r), of("y", rows));
    P.out({R(r) + "y"});
  }
  return plan(L, P);
}

Dims rows_of(int rank) {
  return rank < 0 ? Dims{4, 4} : Dims{2, 4};
}

void relu_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "relu", {p + "x"});
}
void relu_by_maximum(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "zero", rows_of(r), nullptr, "const", {},
         {{"value", 0}, {"shape", dims(rows_of(r))}, {"dtype", "f32"}});
  def_on(g, r, p + "y", rows_of(r), c, "maximum", {p + "zero", p + "x"});
}
void square_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "square", {p + "x"});
}
void pow2(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "pow", {p + "x"}, {{"exponent", 2}});
}
void pow3(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "pow", {p + "x"}, {{"exponent", 3}});
}
void cube_by_mul(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "sq", rows_of(r), nullptr, "mul", {p + "x", p + "x"});
  def_on(g, r, p + "y", rows_of(r), c, "mul", {p + "sq", p + "x"});
}
void div_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "div", {p + "x", p + "z"});
}
void div_by_reciprocal(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "inv", rows_of(r), nullptr, "reciprocal", {p + "z"});
  def_on(g, r, p + "y", rows_of(r), c, "mul", {p + "inv", p + "x"});
}
void minimum_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "minimum", {p + "x", p + "z"});
}
void minimum_by_maximum(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "nx", rows_of(r), nullptr, "neg", {p + "x"});
  def_on(g, r, p + "nz", rows_of(r), nullptr, "scale", {p + "z"}, {{"factor", -1}});
  def_on(g, r, p + "m", rows_of(r), nullptr, "maximum", {p + "nz", p + "nx"});
  def_on(g, r, p + "y", rows_of(r), c, "neg", {p + "m"});
}
void softmax_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "softmax", {p + "x"}, {{"dim", 1}});
}
void softmax_by_hand(Graph& g, int r, const std::string& p, const json& c) {
  Dims col = {rows_of(r)[0], 1};
  def_on(g, r, p + "m", col, nullptr, "max", {p + "x"}, {{"dims", {-1}}, {"keepdim", true}});
  def_on(g, r, p + "d", rows_of(r), nullptr, "sub", {p + "x", p + "m"});
  def_on(g, r, p + "e", rows_of(r), nullptr, "exp", {p + "d"});
  def_on(g, r, p + "s", col, nullptr, "sum", {p + "e"}, {{"dims", {1}}, {"keepdim", true}});
  def_on(g, r, p + "y", rows_of(r), c, "div", {p + "e", p + "s"});
}
void rsqrt_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "rsqrt", {p + "x"});
}
void rsqrt_by_sqrt(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "s", rows_of(r), nullptr, "sqrt", {p + "x"});
  def_on(g, r, p + "y", rows_of(r), c, "reciprocal", {p + "s"});
}
void silu_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "silu", {p + "x"});
}
void silu_by_sigmoid(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "s", rows_of(r), nullptr, "sigmoid", {p + "x"});
  def_on(g, r, p + "y", rows_of(r), c, "mul", {p + "x", p + "s"});
}
void exp_of_sum(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "s", rows_of(r), nullptr, "add", {p + "x", p + "z"});
  def_on(g, r, p + "y", rows_of(r), c, "exp", {p + "s"});
}
void product_of_exps(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "ex", rows_of(r), nullptr, "exp", {p + "x"});
  def_on(g, r, p + "ez", rows_of(r), nullptr, "exp", {p + "z"});
  def_on(g, r, p + "y", rows_of(r), c, "mul", {p + "ex", p + "ez"});
}

TEST(ContractPlans, RealIdentitiesAreProven) {
  expect_equivalent(rewrite(relu_op, relu_by_maximum), "id-relu");
  expect_equivalent(rewrite(square_op, pow2), "id-pow2");
  expect_equivalent(rewrite(pow3, cube_by_mul), "id-pow3");
  expect_equivalent(rewrite(div_op, div_by_reciprocal), "id-div");
  expect_equivalent(rewrite(minimum_op, minimum_by_maximum), "id-min");
  expect_equivalent(rewrite(softmax_op, softmax_by_hand), "id-softmax");
  expect_bug(rewrite(square_op, pow3), "id-pow3-not-square", "y");
}

TEST(ContractPlans, UninterpretedFunctionIdentitiesAreNotUsed) {
  expect_bug(rewrite(rsqrt_op, rsqrt_by_sqrt), "uf-rsqrt", "y");
  expect_bug(rewrite(silu_op, silu_by_sigmoid), "uf-silu", "y");
  expect_bug(rewrite(exp_of_sum, product_of_exps), "uf-exp", "y");
}

// maximum(x, z) written with comparisons; the buggy twin differs only where
// x == z (a difference random testing hardly ever hits: the solver must).
void maximum_op(Graph& g, int r, const std::string& p, const json& c) {
  def_on(g, r, p + "y", rows_of(r), c, "maximum", {p + "x", p + "z"});
}
void maximum_by_where(Graph& g, int r, const std::string& p, const json& c) {
  g.t(p + "gt", rows_of(r), nullptr, r, "bool");
  g.op("gt", {p + "x", p + "z"}, {p + "gt"});
  def_on(g, r, p + "y", rows_of(r), c, "where", {p + "gt", p + "x", p + "z"});
}
void maximum_wrong_on_ties(Graph& g, int r, const std::string& p, const json& c) {
  g.t(p + "gt", rows_of(r), nullptr, r, "bool");
  g.op("gt", {p + "x", p + "z"}, {p + "gt"});
  g.t(p + "eq", rows_of(r), nullptr, r, "bool");
  g.op("eq", {p + "x", p + "z"}, {p + "eq"});
  def_on(g, r, p + "nx", rows_of(r), nullptr, "neg", {p + "x"});
  def_on(g, r, p + "tie", rows_of(r), nullptr, "where", {p + "eq", p + "nx", p + "z"});
  def_on(g, r, p + "y", rows_of(r), c, "where", {p + "gt", p + "x", p + "tie"});
}

TEST(ContractPlans, DifferenceOnlyOnTies) {
  expect_equivalent(rewrite(maximum_op, maximum_by_where), "ties");
  expect_bug(rewrite(maximum_op, maximum_wrong_on_ties), "ties-wrong", "y");
}

}  // namespace
}  // namespace shardproof
