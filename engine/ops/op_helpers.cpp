#include "engine/ops/op_helpers.h"

#include "engine/ops/full_sizes.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace shardproof::ops {

namespace {

const char* type_name(AttrType t) {
  switch (t) {
    case AttrType::Int:
      return "an integer";
    case AttrType::IntList:
      return "a list of integers";
    case AttrType::Bool:
      return "a boolean";
    case AttrType::String:
      return "a string";
    case AttrType::Number:
      return "a number";
  }
  return "?";
}

bool has_type(const Attr& a, AttrType t) {
  switch (t) {
    case AttrType::Int:
      return a.is_int();
    case AttrType::IntList:
      return a.is_int_list();
    case AttrType::Bool:
      return a.kind == Attr::Kind::Bool;
    case AttrType::String:
      return a.kind == Attr::Kind::String;
    case AttrType::Number:
      return a.kind == Attr::Kind::Number;
  }
  return false;
}

}  // namespace

std::string check_attrs(const std::string& op, const AttrMap& attrs,
                        const std::vector<AttrRule>& rules) {
  for (const auto& [key, value] : attrs) {
    const AttrRule* rule = nullptr;
    for (const AttrRule& r : rules)
      if (r.name == key) rule = &r;
    if (!rule) {
      std::string known;
      for (const AttrRule& r : rules) known += (known.empty() ? "" : ", ") + r.name;
      return op + ": unknown attribute '" + key + "' (" +
             (known.empty() ? "it takes no attributes" : "expected one of: " + known) + ")";
    }
    if (!has_type(value, rule->type))
      return op + ": attribute '" + key + "' must be " + type_name(rule->type) + ", found " +
             value.describe();
  }
  for (const AttrRule& r : rules)
    if (r.required && !attrs.count(r.name))
      return op + ": missing required attribute '" + r.name + "' (" + type_name(r.type) + ")";
  return "";
}

int64_t attr_int(const AttrMap& attrs, const std::string& key, int64_t def) {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second.as_int();
}
std::vector<int64_t> attr_ints(const AttrMap& attrs, const std::string& key) {
  auto it = attrs.find(key);
  return it == attrs.end() ? std::vector<int64_t>{} : it->second.as_int_list();
}
bool attr_bool(const AttrMap& attrs, const std::string& key, bool def) {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second.boolean;
}
Rational attr_number(const AttrMap& attrs, const std::string& key, const Rational& def) {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second.number;
}
std::string attr_string(const AttrMap& attrs, const std::string& key, const std::string& def) {
  auto it = attrs.find(key);
  return it == attrs.end() ? def : it->second.text;
}

std::string describe(const TensorInfo& t) {
  return std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape);
}

std::string check_input_count(const std::string& op, const std::vector<TensorInfo>& in,
                              size_t expected) {
  if (in.size() == expected) return "";
  return op + ": expected " + std::to_string(expected) + " input" + (expected == 1 ? "" : "s") +
         ", found " + std::to_string(in.size());
}

std::string check_output_count(const std::string& op, size_t n_out, size_t expected) {
  if (n_out == expected) return "";
  return op + ": expected " + std::to_string(expected) + " output" + (expected == 1 ? "" : "s") +
         ", found " + std::to_string(n_out);
}

std::string check_class(const std::string& op, const std::vector<TensorInfo>& in, size_t index,
                        Allowed allowed) {
  DClass c = dclass_of(in[index].dtype);
  auto where = [&] { return op + ": input " + std::to_string(index) + " must be "; };
  if (allowed == Allowed::Real && c != DClass::Real)
    return where() + "real (" + op + " on " + (c == DClass::Int ? "integers" : "booleans") +
           " is invalid), found " + describe(in[index]);
  if (allowed == Allowed::Numeric && c == DClass::Bool)
    return where() + "real or integer (" + op + " on booleans is invalid), found " +
           describe(in[index]);
  return "";
}

std::string check_same_class(const std::string& op, const std::vector<TensorInfo>& in,
                             size_t first) {
  for (size_t i = first + 1; i < in.size(); ++i)
    if (dclass_of(in[i].dtype) != dclass_of(in[first].dtype))
      return op + ": operands must have one dtype class, found " + describe(in[first]) +
             " (input " + std::to_string(first) + ") and " + describe(in[i]) + " (input " +
             std::to_string(i) + ")";
  return "";
}

std::string check_same_shape(const std::string& op, const std::vector<TensorInfo>& in,
                             size_t first) {
  for (size_t i = first + 1; i < in.size(); ++i)
    if (in[i].shape != in[first].shape)
      return op + ": inputs must have the same shape, found " + shape_to_string(in[first].shape) +
             " (input " + std::to_string(first) + ") and " + shape_to_string(in[i].shape) +
             " (input " + std::to_string(i) + ")";
  return "";
}

std::string normalize_dim(const std::string& op, const std::string& attr, int64_t dim,
                          const Shape& shape, int& out) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (dim < -rank || dim >= rank)
    return op + ": " + attr + " " + std::to_string(dim) + " is out of range for a rank-" +
           std::to_string(rank) + " tensor " + shape_to_string(shape) + " (expected " +
           (rank == 0 ? "no dim" : std::to_string(-rank) + ".." + std::to_string(rank - 1)) + ")";
  out = static_cast<int>(dim < 0 ? dim + rank : dim);
  return "";
}

std::string reduced_dims(const std::string& op, const AttrMap& attrs, const Shape& shape,
                         std::vector<bool>& reduced) {
  reduced.assign(shape.size(), false);
  if (!attrs.count("dims")) {
    reduced.assign(shape.size(), true);
    return "";
  }
  std::vector<int64_t> dims = attr_ints(attrs, "dims");
  if (dims.empty()) return op + ": dims must not be empty (omit it to reduce every dim)";
  for (int64_t d : dims) {
    int nd = 0;
    if (auto e = normalize_dim(op, "dims entry", d, shape, nd); !e.empty()) return e;
    if (reduced[nd])
      return op + ": dims " + attrs.at("dims").describe() + " names dim " + std::to_string(nd) +
             " twice";
    reduced[nd] = true;
  }
  return "";
}

std::string broadcast_shapes(const std::string& op, const std::vector<Shape>& shapes, Shape& out) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  out.assign(rank, 1);
  for (size_t k = 0; k < rank; ++k) {  // k-th dim from the right
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      if (k >= s.size()) continue;
      int64_t size = s[s.size() - 1 - k];
      int64_t& o = out[rank - 1 - k];
      if (size == o || size == 1) continue;
      if (o == 1) {
        o = size;
        continue;
      }
      std::string all;
      for (size_t j = 0; j < shapes.size(); ++j)
        all += (j ? " and " : "") + shape_to_string(shapes[j]);
      return op + ": shapes " + all + " do not broadcast (dim -" + std::to_string(k + 1) + ": " +
             std::to_string(o) + " vs " + std::to_string(size) + ")";
    }
  }
  return "";
}

Shape reduce_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!reduced[d])
      out.push_back(shape[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

int64_t full_count(const OpCall& call, size_t input, const std::vector<bool>& reduced) {
  // Soundness (design.md): a mean divides by the full-size count even when
  // its operands were shrunk, so the count never comes from the values.
  if (call.full_in_shapes.size() <= input || call.full_in_shapes[input].size() != reduced.size())
    throw std::logic_error(call.op + ": OpCall.full_in_shapes must give the full shape of input " +
                           std::to_string(input));
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d) {
    if (!reduced[d]) continue;
    // A size full_sizes.h does not list: a proof key would not cover it.
    if (call.full_in_shapes[input][d] == kUnreadFullSize)
      throw std::logic_error(call.op + ": reads the full size of dim " + std::to_string(d) +
                             " of input " + std::to_string(input) +
                             " that engine/ops/full_sizes.cpp does not list");
    count *= call.full_in_shapes[input][d];
  }
  return count;
}

Shape out_shape_of(const OpCall& call) {
  if (!call.out_shapes.empty()) return call.out_shapes[0];
  return attr_ints(call.attrs, "shape");
}

int64_t broadcast_offset(const Shape& in, const Shape& out, const std::vector<int64_t>& out_index) {
  int64_t flat = 0;
  const size_t shift = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    flat = flat * in[d] + (in[d] == 1 ? 0 : out_index[d + shift]);
  return flat;
}

void relate_broadcast(AxisRelations& rel, int in_slot, const Shape& in, int out_slot,
                      const Shape& out) {
  // Axes the operand is repeated along (leading ones it lacks, and its
  // axes of length 1) relate to nothing: no position there tells values apart.
  const int shift = static_cast<int>(out.size()) - static_cast<int>(in.size());
  for (int d = 0; d < static_cast<int>(in.size()); ++d)
    if (in[d] > 1) rel.same({in_slot, d}, {out_slot, d + shift});
}

void relate_all_broadcast(AxisRelations& rel, const std::vector<TensorInfo>& in,
                          const std::vector<TensorInfo>& out) {
  const int n_in = static_cast<int>(in.size());
  for (int i = 0; i < n_in; ++i)
    for (int o = 0; o < static_cast<int>(out.size()); ++o)
      relate_broadcast(rel, i, in[i].shape, n_in + o, out[o].shape);
}

void relate_moved_positions(AxisRelations& rel, size_t n_in, size_t n_out) {
  for (size_t i = 0; i < n_in; ++i)
    for (size_t o = 0; o < n_out; ++o)
      rel.same_positions(static_cast<int>(i), static_cast<int>(n_in + o));
}

}  // namespace shardproof::ops
