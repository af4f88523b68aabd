#include "planner/plan_builder.h"

#include <numeric>
#include <stdexcept>

namespace shardproof::planner {

namespace {

// Internal planner mistakes are logic errors, not user errors.
[[noreturn]] void fail(const std::string& what) {
  throw std::logic_error("planner internal error: " + what);
}

}  // namespace

std::string fraction(int64_t p, int64_t q) {
  if (q == 0) fail("fraction with zero denominator");
  if (q < 0) p = -p, q = -q;
  int64_t g = std::gcd(p < 0 ? -p : p, q);
  if (g > 1) p /= g, q /= g;
  if (q == 1) return std::to_string(p);
  return std::to_string(p) + "/" + std::to_string(q);
}

Shape extent(const Slice& slice) {
  Shape shape;
  for (auto [lo, hi] : slice) shape.push_back(hi - lo);
  return shape;
}

void GraphBuilder::tensor(const std::string& name, Shape shape, int rank, std::optional<Claim> of,
                          const std::string& dtype) {
  if (tensors_.count(name)) fail("tensor '" + name + "' declared twice");
  if (logical_ && (rank < 0 || rank >= world_))
    fail("tensor '" + name + "' has rank " + std::to_string(rank) + " outside the world");
  TensorInfo info{std::move(shape), rank, std::move(of), dtype};
  if (info.of) check_claim(name, info);
  tensors_.emplace(name, std::move(info));
}

void GraphBuilder::check_claim(const std::string& name, const TensorInfo& t) const {
  if (!logical_) fail("claim on logical tensor '" + name + "'");
  const Claim& c = *t.of;
  if (!logical_->has_tensor(c.tensor))
    fail("'" + name + "' claims unknown logical tensor '" + c.tensor + "'");
  const Shape& full = logical_->shape(c.tensor);
  Shape extent = full;
  if (!c.slice.empty()) {
    if (c.slice.size() != full.size()) fail("'" + name + "': slice rank mismatch");
    for (size_t i = 0; i < full.size(); ++i) {
      auto [lo, hi] = c.slice[i];
      if (lo < 0 || hi > full[i] || lo >= hi) fail("'" + name + "': slice out of range");
      extent[i] = hi - lo;
    }
  }
  if (extent != t.shape) fail("'" + name + "': shape differs from its claim's extent");
  if (c.n < 1 || c.k < 0 || c.k >= c.n) fail("'" + name + "': bad part");
}

void GraphBuilder::require(const std::string& name) const {
  if (!tensors_.count(name)) fail("tensor '" + name + "' used before it is declared");
}

void GraphBuilder::input(const std::string& name) {
  require(name);
  inputs_.push_back(name);
}

void GraphBuilder::output(const std::string& name) {
  require(name);
  outputs_.push_back(name);
}

const Shape& GraphBuilder::shape(const std::string& name) const {
  require(name);
  return tensors_.at(name).shape;
}

int GraphBuilder::rank(const std::string& name) const {
  require(name);
  return tensors_.at(name).rank;
}

void GraphBuilder::op(const std::string& name, const std::string& op, std::vector<std::string> in,
                      std::vector<std::string> out, nlohmann::json attrs) {
  if (op_names_.count(name)) fail("op '" + name + "' declared twice");
  op_names_[name] = true;
  int r = -1;
  for (const auto* list : {&in, &out})
    for (const std::string& t : *list) {
      require(t);
      // A local op runs on one rank: catch a cross-rank wiring slip here.
      if (logical_ && r >= 0 && tensors_.at(t).rank != r)
        fail("op '" + name + "' spans ranks (tensor '" + t + "')");
      r = tensors_.at(t).rank;
    }
  nlohmann::json j = {{"name", name}, {"op", op}, {"in", in}, {"out", out}};
  if (!attrs.empty()) j["attrs"] = std::move(attrs);
  if (logical_) j["rank"] = r;
  ops_.push_back(std::move(j));
}

void GraphBuilder::collective(const std::string& name, const std::string& op,
                              std::vector<std::string> in, std::vector<std::string> out,
                              std::vector<int> group, nlohmann::json attrs) {
  if (!logical_) fail("collective '" + name + "' in the logical graph");
  if (op_names_.count(name)) fail("op '" + name + "' declared twice");
  op_names_[name] = true;
  for (size_t i = 0; i < in.size(); ++i) {
    require(in[i]);
    // send: one input on group[0]; every other collective: input i on group[i].
    if (tensors_.at(in[i]).rank != group.at(i)) fail("op '" + name + "': input on wrong rank");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    require(out[i]);
    size_t g = op == "send" ? 1 : i;
    if (tensors_.at(out[i]).rank != group.at(g)) fail("op '" + name + "': output on wrong rank");
  }
  nlohmann::json j = {{"name", name}, {"op", op}, {"in", in}, {"out", out}, {"group", group}};
  if (!attrs.empty()) j["attrs"] = std::move(attrs);
  ops_.push_back(std::move(j));
}

nlohmann::json GraphBuilder::to_json() const {
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, t] : tensors_) {
    nlohmann::json j = {{"shape", t.shape}, {"dtype", t.dtype}};
    if (t.rank >= 0) j["rank"] = t.rank;
    if (t.of) {
      nlohmann::json of = {{"tensor", t.of->tensor}};
      if (!t.of->slice.empty()) {
        nlohmann::json slice = nlohmann::json::array();
        for (auto [lo, hi] : t.of->slice) slice.push_back({lo, hi});
        of["slice"] = std::move(slice);
      }
      if (t.of->n > 1) of["part"] = {t.of->k, t.of->n};
      if (!t.of->over.empty()) {
        nlohmann::json over = nlohmann::json::array();
        for (const OverBlocks& o : t.of->over)
          over.push_back(o.count == 1 ? nlohmann::json{o.lo, o.hi}
                                      : nlohmann::json{o.lo, o.hi, o.step, o.count});
        of["over"] = std::move(over);
      }
      j["of"] = std::move(of);
    }
    tensors[name] = std::move(j);
  }
  nlohmann::json g = {
      {"tensors", std::move(tensors)}, {"inputs", inputs_}, {"ops", ops_}, {"outputs", outputs_}};
  if (logical_) g["world"] = world_;
  return g;
}

}  // namespace shardproof::planner
