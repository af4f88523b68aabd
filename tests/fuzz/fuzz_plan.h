// Shared pieces of the soundness fuzzer's plan generators: a random source,
// a generated plan, and a builder for one graph of a plan document.
#pragma once

#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace shardproof::fuzz {

using nlohmann::json;

// A generated plan: `faulty` when a fault was injected on purpose (the
// verdict is still checked against full-size evaluation, never against it).
struct FuzzPlan {
  json plan;
  bool faulty = false;
  std::string kind;  // the generator's family, for the log
};

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  // Uniform in [lo, hi).
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi - 1)(rng_); }
  bool coin() { return pick(0, 2) == 0; }
  template <class T, size_t N>
  const T& of(const T (&items)[N]) {
    return items[static_cast<size_t>(pick(0, static_cast<int>(N)))];
  }

 private:
  std::mt19937_64 rng_;
};

// One graph of a plan document. Parallel tensors carry `rank` and, when
// given, lineage `of`.
class GraphJson {
 public:
  void tensor(const std::string& name, json shape, const std::string& dtype = "f32", int rank = -1,
              json of = nullptr) {
    json d = {{"shape", std::move(shape)}, {"dtype", dtype}};
    if (rank >= 0) d["rank"] = rank;
    if (!of.is_null()) d["of"] = std::move(of);
    tensors_[name] = std::move(d);
  }
  json shape(const std::string& name) const { return tensors_.at(name).at("shape"); }
  std::string dtype(const std::string& name) const { return tensors_.at(name).at("dtype"); }
  void claim(const std::string& name, json of) { tensors_.at(name)["of"] = std::move(of); }
  void input(const std::string& name) { inputs_.push_back(name); }
  void output(const std::string& name) { outputs_.push_back(name); }
  void op(const std::string& kind, json in, json out, json attrs = json::object(),
          json group = nullptr) {
    json o = {{"name", "op" + std::to_string(ops_.size())},
              {"op", kind},
              {"in", std::move(in)},
              {"out", std::move(out)},
              {"attrs", std::move(attrs)}};
    if (!group.is_null()) o["group"] = std::move(group);
    ops_.push_back(std::move(o));
  }
  json& ops() { return ops_; }
  json document() const {
    return {{"tensors", tensors_}, {"inputs", inputs_}, {"ops", ops_}, {"outputs", outputs_}};
  }

 private:
  json tensors_ = json::object(), inputs_ = json::array(), ops_ = json::array(),
       outputs_ = json::array();
};

inline json plan_document(const GraphJson& logical, const GraphJson& parallel, int world) {
  json p = parallel.document();
  p["world"] = world;
  return {{"format", "shardproof-plan/1"},
          {"name", "fuzz"},
          {"logical", logical.document()},
          {"parallel", std::move(p)}};
}

}  // namespace shardproof::fuzz
