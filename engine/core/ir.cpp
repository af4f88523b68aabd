#include "engine/core/ir.h"

namespace shardproof {

DClass dclass_of(DType t) {
  switch (t) {
    case DType::I32:
    case DType::I64:
      return DClass::Int;
    case DType::Bool:
      return DClass::Bool;
    default:
      return DClass::Real;
  }
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F64:
      return "f64";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType t :
       {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64, DType::Bool})
    if (name == dtype_name(t)) return t;
  return std::nullopt;
}

const char* dclass_name(DClass c) {
  switch (c) {
    case DClass::Real:
      return "real";
    case DClass::Int:
      return "integer";
    case DClass::Bool:
      return "boolean";
  }
  return "?";
}

int64_t element_count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string box_to_string(const SliceSpec& box) {
  std::string s = "[";
  for (size_t a = 0; a < box.size(); ++a)
    s += (a ? ", " : "") + std::to_string(box[a].first) + ":" + std::to_string(box[a].second);
  return s + "]";
}

std::string over_to_string(const OverSpec& over) {
  std::string s = "[";
  for (size_t a = 0; a < over.size(); ++a) {
    const OverRange& r = over[a];
    s += (a ? ", " : "") + std::to_string(r.lo) + ":" + std::to_string(r.hi);
    if (r.count > 1) s += " step " + std::to_string(r.step) + " x" + std::to_string(r.count);
  }
  return s + "]";
}

std::string source_to_string(const SourceRef& src) {
  std::string s = src.file + ":" + std::to_string(src.line);
  if (!src.function.empty()) s += " (" + src.function + ")";
  return s;
}

std::string Op::display_name() const {
  return name.empty() ? "#" + std::to_string(index) + " " + op : name;
}

int Graph::find(const std::string& name) const {
  auto it = tensor_index.find(name);
  return it == tensor_index.end() ? -1 : it->second;
}

}  // namespace shardproof
