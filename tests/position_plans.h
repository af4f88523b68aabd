// Plans whose integer values are positions on a vocabulary line: a
// vocab-parallel embedding (forward with masks and `ids - lo`), its one-hot
// backward, and vocab-parallel target-logit selection with `gather` (the
// cross-entropy target). Each builder takes the correct plan's shape and
// optional injected bugs; shape_reduction_test.cpp checks that the vocabulary
// line reduces and verifies, soundness_test.cpp that each bug is refuted.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace shardproof::testing::positions {

using nlohmann::json;

struct VocabPlan {
  int64_t vocab = 50000;
  int64_t tokens = 4;
  int64_t dim = 2;
  // Injected bugs, all on rank 1 unless said otherwise.
  int64_t offset_error = 0;       // subtracts lo + offset_error instead of lo
  int64_t mask_error = 0;         // masks ids >= lo + mask_error instead of ids >= lo
  bool strict_mask = false;       // masks ids > lo instead of ids >= lo
  bool swap_shards = false;       // both ranks use the other rank's range with their own shard
  bool shard_accumulate = false;  // backward: every row a rank hits gets all its tokens' dy
  bool untouched_rows = false;    // backward: untouched rows of shard 1 get dy[0] when tokens 0
                                  // and 1 hit two different rows of shard 1

  int64_t shard() const { return vocab / 2; }
  // The range rank r handles, before injected bugs.
  int64_t lo(int r) const { return (swap_shards ? 1 - r : r) * shard(); }
  int64_t hi(int r) const { return lo(r) + shard(); }
};

inline json tensor(json shape, const std::string& dtype = "f32") {
  return {{"shape", shape}, {"dtype", dtype}};
}
inline json ptensor(json shape, int rank, json of = nullptr, const std::string& dtype = "f32") {
  json t = {{"shape", shape}, {"dtype", dtype}, {"rank", rank}};
  if (!of.is_null()) t["of"] = of;
  return t;
}
inline json op(const std::string& name, const std::string& kind, json in, json out,
               json attrs = json::object()) {
  return {{"name", name}, {"op", kind}, {"in", in}, {"out", out}, {"attrs", attrs}};
}
inline json constant(const std::string& name, json value, json shape, const std::string& dtype) {
  return op(name, "const", json::array(), {name},
            {{"value", value}, {"shape", shape}, {"dtype", dtype}});
}
inline json plan(json logical, json parallel) {
  return {{"format", "shardproof-plan/1"},
          {"name", "positions"},
          {"logical", logical},
          {"parallel", parallel}};
}

// Adds to rank r's graph the mask `p.mask` = (ids >= lo) & (ids < hi) over
// integer tensor `ids` of shape `shape`, and `p.safe` = where(mask, ids -
// lo, 0), the shard-local index that is valid for every token.
inline void shard_local_ids(const VocabPlan& c, int r, const std::string& ids, json shape,
                            json& tensors, json& ops) {
  const std::string p = "r" + std::to_string(r) + ".";
  const bool buggy = r == 1;
  const int64_t mask_lo = c.lo(r) + (buggy ? c.mask_error : 0);
  const int64_t sub_lo = c.lo(r) + (buggy ? c.offset_error : 0);
  for (const char* t : {"lo", "hi", "sub_lo", "zero"})
    tensors[p + t] = ptensor(json::array(), r, nullptr, "i64");
  tensors[p + "no"] = ptensor(json::array(), r, nullptr, "bool");
  for (const char* t : {"above", "below", "mask"})
    tensors[p + t] = ptensor(shape, r, nullptr, "bool");
  for (const char* t : {"local", "safe"}) tensors[p + t] = ptensor(shape, r, nullptr, "i64");
  ops.push_back(constant(p + "lo", mask_lo, json::array(), "i64"));
  ops.push_back(constant(p + "hi", c.hi(r), json::array(), "i64"));
  ops.push_back(constant(p + "sub_lo", sub_lo, json::array(), "i64"));
  ops.push_back(constant(p + "zero", 0, json::array(), "i64"));
  ops.push_back(constant(p + "no", 0, json::array(), "bool"));
  ops.push_back(
      op(p + "above", buggy && c.strict_mask ? "gt" : "ge", {ids, p + "lo"}, {p + "above"}));
  ops.push_back(op(p + "below", "lt", {ids, p + "hi"}, {p + "below"}));
  ops.push_back(op(p + "mask", "where", {p + "above", p + "below", p + "no"}, {p + "mask"}));
  ops.push_back(op(p + "local", "sub", {ids, p + "sub_lo"}, {p + "local"}));
  ops.push_back(op(p + "safe", "where", {p + "mask", p + "local", p + "zero"}, {p + "safe"}));
}

// out[T, d] = embedding(ids[T], table[V, d]); rank r holds table rows
// [r V/2, (r+1) V/2), looks up its own tokens and the partial rows are
// all-reduced.
inline json vocab_parallel_embedding(const VocabPlan& c) {
  const int64_t T = c.tokens, d = c.dim;
  json logical = {
      {"tensors",
       {{"ids", tensor({T}, "i64")}, {"table", tensor({c.vocab, d})}, {"out", tensor({T, d})}}},
      {"inputs", {"ids", "table"}},
      {"ops", {op("embed", "embedding", {"ids", "table"}, {"out"})}},
      {"outputs", {"out"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array(), partials = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int64_t lo = r * c.shard();
    tensors[p + "ids"] = ptensor({T}, r, {{"tensor", "ids"}}, "i64");
    tensors[p + "table"] = ptensor(
        {c.shard(), d}, r, {{"tensor", "table"}, {"slice", {{lo, lo + c.shard()}, {0, d}}}});
    shard_local_ids(c, r, p + "ids", {T}, tensors, ops);
    tensors[p + "rows"] = ptensor({T, d}, r);
    tensors[p + "mask2"] = ptensor({T, 1}, r, nullptr, "bool");
    tensors[p + "zf"] = ptensor(json::array(), r);
    tensors[p + "partial"] = ptensor({T, d}, r);
    tensors[p + "out"] = ptensor({T, d}, r, {{"tensor", "out"}});
    ops.push_back(op(p + "rows", "embedding", {p + "safe", p + "table"}, {p + "rows"}));
    ops.push_back(op(p + "mask2", "reshape", {p + "mask"}, {p + "mask2"}, {{"shape", {T, 1}}}));
    ops.push_back(constant(p + "zf", 0, json::array(), "f32"));
    ops.push_back(op(p + "partial", "where", {p + "mask2", p + "rows", p + "zf"}, {p + "partial"}));
    inputs.push_back(p + "ids");
    inputs.push_back(p + "table");
    partials.push_back(p + "partial");
    outputs.push_back(p + "out");
  }
  ops.push_back({{"name", "allreduce"},
                 {"op", "all_reduce"},
                 {"in", partials},
                 {"out", outputs},
                 {"group", {0, 1}}});
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return plan(logical, parallel);
}

// grad[V, d] = onehot(ids)^T @ dy with onehot = cast(eq(ids[T, 1], iota[1, V]));
// rank r computes the rows of its shard from eq(ids - lo, iota[1, V/2]) (a
// token of the other shard matches no local row), no collective needed.
inline json vocab_parallel_onehot_backward(const VocabPlan& c) {
  const int64_t T = c.tokens, d = c.dim, V = c.vocab;
  json logical = {{"tensors",
                   {{"ids", tensor({T}, "i64")},
                    {"dy", tensor({T, d})},
                    {"idc", tensor({T, 1}, "i64")},
                    {"iota", tensor({1, V}, "i64")},
                    {"hit", tensor({T, V}, "bool")},
                    {"onehot", tensor({T, V})},
                    {"grad", tensor({V, d})}}},
                  {"inputs", {"ids", "dy"}},
                  {"ops",
                   {op("idc", "reshape", {"ids"}, {"idc"}, {{"shape", {T, 1}}}),
                    op("iota", "iota", json::array(), {"iota"}, {{"shape", {1, V}}, {"dim", 1}}),
                    op("hit", "eq", {"idc", "iota"}, {"hit"}),
                    op("onehot", "cast", {"hit"}, {"onehot"}, {{"dtype", "f32"}}),
                    op("grad", "matmul", {"onehot", "dy"}, {"grad"}, {{"transpose_a", true}})}},
                  {"outputs", {"grad"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array();
  const int64_t S = c.shard();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int64_t lo = r * S;
    const int64_t sub_lo = c.lo(r) + (r == 1 ? c.offset_error : 0);
    tensors[p + "ids"] = ptensor({T}, r, {{"tensor", "ids"}}, "i64");
    tensors[p + "dy"] = ptensor({T, d}, r, {{"tensor", "dy"}});
    tensors[p + "lo"] = ptensor(json::array(), r, nullptr, "i64");
    tensors[p + "local"] = ptensor({T}, r, nullptr, "i64");
    tensors[p + "lc"] = ptensor({T, 1}, r, nullptr, "i64");
    tensors[p + "iota"] = ptensor({1, S}, r, nullptr, "i64");
    tensors[p + "hit"] = ptensor({T, S}, r, nullptr, "bool");
    tensors[p + "onehot"] = ptensor({T, S}, r);
    json grad_of = {{"tensor", "grad"}, {"slice", {{lo, lo + S}, {0, d}}}};
    ops.push_back(constant(p + "lo", sub_lo, json::array(), "i64"));
    ops.push_back(op(p + "local", "sub", {p + "ids", p + "lo"}, {p + "local"}));
    ops.push_back(op(p + "lc", "reshape", {p + "local"}, {p + "lc"}, {{"shape", {T, 1}}}));
    ops.push_back(
        op(p + "iota", "iota", json::array(), {p + "iota"}, {{"shape", {1, S}}, {"dim", 1}}));
    ops.push_back(op(p + "hit", "eq", {p + "lc", p + "iota"}, {p + "hit"}));
    ops.push_back(op(p + "onehot", "cast", {p + "hit"}, {p + "onehot"}, {{"dtype", "f32"}}));
    const bool accumulate_bug = r == 1 && c.shard_accumulate;
    const bool untouched_bug = r == 1 && c.untouched_rows;
    if (!accumulate_bug && !untouched_bug) {
      tensors[p + "grad"] = ptensor({S, d}, r, grad_of);
      ops.push_back(op(p + "grad", "matmul", {p + "onehot", p + "dy"}, {p + "grad"},
                       {{"transpose_a", true}}));
    } else {
      // Shared by both bugs: touched[v] = any token hits row v; in[t] =
      // token t's id is in this shard.
      tensors[p + "touched"] = ptensor({S}, r);
      tensors[p + "tc"] = ptensor({S, 1}, r);
      ops.push_back(op(p + "touched", "max", {p + "onehot"}, {p + "touched"}, {{"dims", {0}}}));
      ops.push_back(op(p + "tc", "reshape", {p + "touched"}, {p + "tc"}, {{"shape", {S, 1}}}));
    }
    if (accumulate_bug || untouched_bug) {
      // in[t] = token t's id is in this shard (from the masks, without
      // combining along the vocabulary).
      tensors[p + "hi"] = ptensor(json::array(), r, nullptr, "i64");
      for (const char* t : {"above", "below"}) tensors[p + t] = ptensor({T}, r, nullptr, "bool");
      for (const char* t : {"af", "bf", "in"}) tensors[p + t] = ptensor({T}, r);
      ops.push_back(constant(p + "hi", c.hi(r), json::array(), "i64"));
      ops.push_back(op(p + "above", "ge", {p + "ids", p + "lo"}, {p + "above"}));
      ops.push_back(op(p + "below", "lt", {p + "ids", p + "hi"}, {p + "below"}));
      ops.push_back(op(p + "af", "cast", {p + "above"}, {p + "af"}, {{"dtype", "f32"}}));
      ops.push_back(op(p + "bf", "cast", {p + "below"}, {p + "bf"}, {{"dtype", "f32"}}));
      ops.push_back(op(p + "in", "mul", {p + "af", p + "bf"}, {p + "in"}));
    }
    if (accumulate_bug) {
      // Every row the rank hits receives the sum of all its tokens' dy:
      // right as long as the rank's tokens share one id.
      tensors[p + "ic"] = ptensor({T, 1}, r);
      tensors[p + "dsum"] = ptensor({1, d}, r);
      tensors[p + "grad"] = ptensor({S, d}, r, grad_of);
      ops.push_back(op(p + "ic", "reshape", {p + "in"}, {p + "ic"}, {{"shape", {T, 1}}}));
      ops.push_back(
          op(p + "dsum", "matmul", {p + "ic", p + "dy"}, {p + "dsum"}, {{"transpose_a", true}}));
      ops.push_back(op(p + "grad", "mul", {p + "tc", p + "dsum"}, {p + "grad"}));
    }
    if (untouched_bug) {
      // Correct rows, plus dy[0] on every untouched row of the shard when
      // tokens 0 and 1 hit two different rows of it: visible only with both
      // ids and an untouched row in one piece.
      auto first = [&](const std::string& name, const std::string& from, int64_t k,
                       const std::string& dtype) {
        tensors[p + name] = ptensor({1}, r, nullptr, dtype);
        ops.push_back(op(p + name, "slice", {p + from}, {p + name},
                         {{"dim", 0}, {"start", k}, {"end", k + 1}}));
      };
      first("l0", "local", 0, "i64");
      first("l1", "local", 1, "i64");
      first("i0", "in", 0, "f32");
      first("i1", "in", 1, "f32");
      tensors[p + "same"] = ptensor({1}, r, nullptr, "bool");
      for (const char* t : {"both", "sf", "differ", "two"}) tensors[p + t] = ptensor({1}, r);
      tensors[p + "one"] = ptensor(json::array(), r);
      tensors[p + "untouched"] = ptensor({S, 1}, r);
      tensors[p + "gate"] = ptensor({S, 1}, r);
      tensors[p + "dy0"] = ptensor({1, d}, r);
      tensors[p + "extra"] = ptensor({S, d}, r);
      tensors[p + "right"] = ptensor({S, d}, r);
      tensors[p + "grad"] = ptensor({S, d}, r, grad_of);
      ops.push_back(op(p + "both", "mul", {p + "i0", p + "i1"}, {p + "both"}));
      ops.push_back(op(p + "same", "eq", {p + "l0", p + "l1"}, {p + "same"}));
      ops.push_back(op(p + "sf", "cast", {p + "same"}, {p + "sf"}, {{"dtype", "f32"}}));
      ops.push_back(constant(p + "one", 1, json::array(), "f32"));
      ops.push_back(op(p + "differ", "sub", {p + "one", p + "sf"}, {p + "differ"}));
      ops.push_back(op(p + "two", "mul", {p + "both", p + "differ"}, {p + "two"}));
      ops.push_back(op(p + "untouched", "sub", {p + "one", p + "tc"}, {p + "untouched"}));
      ops.push_back(op(p + "gate", "mul", {p + "untouched", p + "two"}, {p + "gate"}));
      ops.push_back(
          op(p + "dy0", "slice", {p + "dy"}, {p + "dy0"}, {{"dim", 0}, {"start", 0}, {"end", 1}}));
      ops.push_back(op(p + "extra", "mul", {p + "gate", p + "dy0"}, {p + "extra"}));
      ops.push_back(op(p + "right", "matmul", {p + "onehot", p + "dy"}, {p + "right"},
                       {{"transpose_a", true}}));
      ops.push_back(op(p + "grad", "add", {p + "right", p + "extra"}, {p + "grad"}));
    }
    inputs.push_back(p + "ids");
    inputs.push_back(p + "dy");
    outputs.push_back(p + "grad");
  }
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return plan(logical, parallel);
}

// target[T, 1] = gather(logits[T, V], labels[T, 1], dim 1): the logit of
// each token's label, the cross-entropy target. Rank r holds logits columns
// [r V/2, (r+1) V/2), picks its tokens' targets and the parts are
// all-reduced.
inline json vocab_parallel_target_logits(const VocabPlan& c) {
  const int64_t T = c.tokens, V = c.vocab, S = c.shard();
  json logical = {
      {"tensors",
       {{"logits", tensor({T, V})}, {"labels", tensor({T, 1}, "i64")}, {"target", tensor({T, 1})}}},
      {"inputs", {"logits", "labels"}},
      {"ops", {op("pick", "gather", {"logits", "labels"}, {"target"}, {{"dim", 1}})}},
      {"outputs", {"target"}}};
  json tensors = json::object(), ops = json::array(), inputs = json::array(),
       outputs = json::array(), partials = json::array();
  for (int r = 0; r < 2; ++r) {
    const std::string p = "r" + std::to_string(r) + ".";
    const int64_t lo = r * S;
    tensors[p + "labels"] = ptensor({T, 1}, r, {{"tensor", "labels"}}, "i64");
    tensors[p + "logits"] =
        ptensor({T, S}, r, {{"tensor", "logits"}, {"slice", {{0, T}, {lo, lo + S}}}});
    shard_local_ids(c, r, p + "labels", {T, 1}, tensors, ops);
    tensors[p + "picked"] = ptensor({T, 1}, r);
    tensors[p + "zf"] = ptensor(json::array(), r);
    tensors[p + "partial"] = ptensor({T, 1}, r);
    tensors[p + "target"] = ptensor({T, 1}, r, {{"tensor", "target"}});
    ops.push_back(
        op(p + "picked", "gather", {p + "logits", p + "safe"}, {p + "picked"}, {{"dim", 1}}));
    ops.push_back(constant(p + "zf", 0, json::array(), "f32"));
    ops.push_back(
        op(p + "partial", "where", {p + "mask", p + "picked", p + "zf"}, {p + "partial"}));
    inputs.push_back(p + "labels");
    inputs.push_back(p + "logits");
    partials.push_back(p + "partial");
    outputs.push_back(p + "target");
  }
  ops.push_back({{"name", "allreduce"},
                 {"op", "all_reduce"},
                 {"in", partials},
                 {"out", outputs},
                 {"group", {0, 1}}});
  json parallel = {
      {"world", 2}, {"tensors", tensors}, {"inputs", inputs}, {"ops", ops}, {"outputs", outputs}};
  return plan(logical, parallel);
}

}  // namespace shardproof::testing::positions
