#include "planner/compact_builder.h"

#include <stdexcept>

namespace shardproof::planner {

CompactBuilder::CompactBuilder(std::vector<std::pair<std::string, int>> axes, int mb) {
  nlohmann::json list = nlohmann::json::array();
  for (auto& [name, size] : axes) list.push_back({name, size});
  mesh_ = {{"axes", std::move(list)}, {"mb", mb}};
}

size_t CompactBuilder::program(const std::string& name, const std::string& on) {
  nlohmann::json p = {
      {"name", name}, {"tensors", nlohmann::json::array()}, {"ops", nlohmann::json::array()}};
  if (!on.empty()) p["on"] = on;
  programs_.push_back(std::move(p));
  current_ = programs_.size() - 1;
  return current_;
}

void CompactBuilder::select(size_t program) {
  if (program >= programs_.size())
    throw std::logic_error("planner internal error: no program " + std::to_string(program));
  current_ = program;
}

void CompactBuilder::mark(size_t program, size_t tensor, const std::string& flag) {
  programs_.at(program)["tensors"].at(tensor)[flag] = true;
}

nlohmann::json& CompactBuilder::current() {
  // Internal planner mistake, not a user error.
  if (programs_.empty()) throw std::logic_error("planner internal error: no program started");
  return programs_[current_];
}

size_t CompactBuilder::tensor(TensorTemplate t) {
  nlohmann::json j = {{"name", t.name}, {"shape", t.shape}, {"dtype", t.dtype}};
  if (t.of) {
    nlohmann::json of = {{"tensor", t.of->tensor}};
    if (!t.of->slice.empty()) {
      nlohmann::json slice = nlohmann::json::array();
      for (auto& [lo, hi] : t.of->slice) slice.push_back({lo, hi});
      of["slice"] = std::move(slice);
    }
    if (t.of->n != 1) of["part"] = {t.of->k, t.of->n};
    if (!t.of->over.empty()) {
      nlohmann::json over = nlohmann::json::array();
      for (const ClaimTemplate::Over& o : t.of->over)
        over.push_back(o.count == 1 ? nlohmann::json{o.lo, o.hi}
                                    : nlohmann::json{o.lo, o.hi, o.step, o.count});
      of["over"] = std::move(over);
    }
    j["of"] = std::move(of);
  }
  if (!t.when.empty()) j["when"] = t.when;
  if (t.input) j["input"] = true;
  if (t.output) j["output"] = true;
  current()["tensors"].push_back(std::move(j));
  return current()["tensors"].size() - 1;
}

void CompactBuilder::op(const std::string& name, const std::string& op, std::vector<std::string> in,
                        std::vector<std::string> out, nlohmann::json attrs,
                        const std::string& when) {
  nlohmann::json j = {{"name", name}, {"op", op}, {"in", std::move(in)}, {"out", std::move(out)}};
  if (!attrs.empty()) j["attrs"] = std::move(attrs);
  if (!when.empty()) j["when"] = when;
  current()["ops"].push_back(std::move(j));
}

void CompactBuilder::collective(const std::string& name, const std::string& op,
                                const std::string& in, const std::string& out,
                                std::vector<std::string> group, nlohmann::json attrs,
                                const std::string& when) {
  nlohmann::json j = {{"name", name}, {"op", op}, {"in", {in}}, {"out", {out}}, {"group", group}};
  if (!attrs.empty()) j["attrs"] = std::move(attrs);
  if (!when.empty()) j["when"] = when;
  current()["ops"].push_back(std::move(j));
}

void CompactBuilder::send(const std::string& name, const std::string& in, const std::string& out,
                          nlohmann::json to, const std::string& when) {
  nlohmann::json j = {
      {"name", name}, {"op", "send"}, {"in", {in}}, {"out", {out}}, {"to", std::move(to)}};
  if (!when.empty()) j["when"] = when;
  current()["ops"].push_back(std::move(j));
}

nlohmann::json CompactBuilder::to_json() const {
  return {{"mesh", mesh_}, {"programs", programs_}};
}

std::string all_of(std::initializer_list<std::string> parts) {
  std::string s;
  for (const std::string& p : parts)
    if (!p.empty()) s += (s.empty() ? "" : " && ") + p;
  return s;
}

namespace {

std::string in(const Site::Range& r) {
  const std::string lo = std::to_string(r.lo), hi = std::to_string(r.hi);
  return r.lo == r.hi ? r.axis + " == " + lo : r.axis + " >= " + lo + " && " + r.axis + " <= " + hi;
}

}  // namespace

std::string Site::inside() const {
  std::string s;
  for (const Range& r : ranges) s = all_of({s, in(r)});
  return s;
}

std::vector<std::string> Site::outside() const {
  std::vector<std::string> pieces;
  std::string prefix;
  for (const Range& r : ranges) {
    if (r.lo > 0) pieces.push_back(all_of({prefix, r.axis + " < " + std::to_string(r.lo)}));
    if (r.hi < r.size - 1)
      pieces.push_back(all_of({prefix, r.axis + " > " + std::to_string(r.hi)}));
    prefix = all_of({prefix, in(r)});
  }
  return pieces;
}

}  // namespace shardproof::planner
