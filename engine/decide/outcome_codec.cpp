#include "engine/decide/outcome_codec.h"

#include <cctype>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace shardproof {
namespace {

using nlohmann::json;

// A finding field that cannot be written by position: the outcome is not shared.
struct NotEncodable {};

std::string stage_label(const Stage& stage) {
  return "stage " + std::to_string(stage.id) + ": " + stage.title;
}

// Word characters: a name glued to one of them is part of a longer word.
// '.' is not one, so "x." (the end of a sentence) and "x.w" both mention x.
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Whether `name` occurs in `text` as a whole name, not inside a longer word
// ("y" is not in "by"). A name that starts or ends with punctuation matches
// as a plain substring: when unsure, say yes (the outcome is then not shared).
bool mentions(const std::string& text, const std::string& name) {
  if (name.empty()) return false;
  for (size_t p = text.find(name); p != std::string::npos; p = text.find(name, p + 1)) {
    size_t end = p + name.size();
    bool starts = p == 0 || !is_name_char(name.front()) || !is_name_char(text[p - 1]);
    bool ends = end == text.size() || !is_name_char(name.back()) || !is_name_char(text[end]);
    if (starts && ends) return true;
  }
  return false;
}

class StageNames {
 public:
  explicit StageNames(const Stage& stage) : stage_(stage) {}

  // True when a text that is stored verbatim quotes any name of the stage.
  bool mentioned_in(const std::string& text) const {
    for (const StageTensor& t : stage_.tensors)
      if (mentions(text, t.name)) return true;
    for (const StageOp& op : stage_.ops)
      if (mentions(text, op.display_name)) return true;
    return false;
  }

  void check_name_free(const json& value) const {
    if (value.is_string() && mentioned_in(value.get<std::string>())) throw NotEncodable{};
    if (value.is_object())
      for (const auto& [key, item] : value.items()) {
        if (mentioned_in(key)) throw NotEncodable{};
        check_name_free(item);
      }
    if (value.is_array())
      for (const json& item : value) check_name_free(item);
  }

  // The position of the only stage tensor called `name` that `fits`.
  template <class Fits>
  int tensor(const std::string& name, Fits fits) const {
    int found = -1;
    for (size_t i = 0; i < stage_.tensors.size(); ++i) {
      if (stage_.tensors[i].name != name || !fits(stage_.tensors[i])) continue;
      if (found >= 0) throw NotEncodable{};  // ambiguous
      found = static_cast<int>(i);
    }
    if (found < 0) throw NotEncodable{};
    return found;
  }

  int parallel_op(const std::string& display_name) const {
    int found = -1;
    for (size_t i = 0; i < stage_.ops.size(); ++i) {
      if (!stage_.ops[i].parallel || stage_.ops[i].display_name != display_name) continue;
      if (found >= 0) throw NotEncodable{};
      found = static_cast<int>(i);
    }
    if (found < 0) throw NotEncodable{};
    return found;
  }

 private:
  const Stage& stage_;
};

bool is_parallel(const StageTensor& t) {
  return t.parallel;
}
bool is_logical_input(const StageTensor& t) {
  return !t.parallel && t.free;
}
bool is_part(const StageTensor& t) {
  return t.parallel && t.of && t.of->has_part;
}

// The counterexample's named-tensor tables, keyed by position ("#3") in the
// stored form. Which tables hold which tensors follows counterexample.cpp.
struct NamedTable {
  const char* key;
  bool (*fits)(const StageTensor&);
};
constexpr NamedTable kNamedTables[] = {{"inputs", is_logical_input}, {"parts", is_part}};

// The counterexample's full-size replay: a counterexample of its own.
constexpr const char* kFullSizeKey = "full_size";

const NamedTable* named_table(const std::string& key) {
  for (const NamedTable& t : kNamedTables)
    if (key == t.key) return &t;
  return nullptr;
}

json encode_counterexample(const StageNames& names, const json& cx) {
  if (!cx.is_object()) {
    names.check_name_free(cx);
    return cx;
  }
  json out = json::object();
  for (const auto& [key, value] : cx.items()) {
    // The full-size replay (full_size_witness.cpp) holds tables of its own.
    if (key == kFullSizeKey && value.is_object()) {
      out[key] = encode_counterexample(names, value);
      continue;
    }
    const NamedTable* table = named_table(key);
    if (table == nullptr || !value.is_object()) {
      if (names.mentioned_in(key)) throw NotEncodable{};
      names.check_name_free(value);
      out[key] = value;
      continue;
    }
    json renamed = json::object();
    for (const auto& [name, tensor] : value.items()) {
      names.check_name_free(tensor);
      renamed["#" + std::to_string(names.tensor(name, table->fits))] = tensor;
    }
    out[key] = std::move(renamed);
  }
  return out;
}

// The claim label that starts a mismatch message, built from the claiming
// tensors the way stage_claims.h builds it. Form 0: "a + b" (or just "a");
// form 1: "a (replica of b)".
std::optional<std::string> claim_label(int form, const std::vector<std::string>& tensors) {
  if (tensors.empty()) return std::nullopt;
  if (form == 0) {
    std::string label;
    for (const std::string& t : tensors) label += (label.empty() ? "" : " + ") + t;
    return label;
  }
  if (form == 1 && tensors.size() == 2) return tensors[0] + " (replica of " + tensors[1] + ")";
  return std::nullopt;
}

json encode_message(const StageNames& names, const Finding& f) {
  for (int form = 0; form < 2; ++form) {
    std::optional<std::string> label = claim_label(form, f.parallel_tensors);
    if (!label) continue;
    std::string prefix = *label + " differs from " + f.tensor;
    if (f.message.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = f.message.substr(prefix.size());
    if (names.mentioned_in(rest)) continue;
    return {{"label", form}, {"rest", rest}};
  }
  if (names.mentioned_in(f.message)) throw NotEncodable{};
  return {{"text", f.message}};
}

json encode_finding(const Stage& stage, const StageNames& names, const Finding& f) {
  if (f.stage != stage_label(stage) || f.tensor != stage.tensors[stage.target].name)
    throw NotEncodable{};
  if (names.mentioned_in(f.kind)) throw NotEncodable{};
  json tensors = json::array(), also = json::array(), ops = json::array();
  for (const std::string& name : f.parallel_tensors)
    tensors.push_back(names.tensor(name, is_parallel));
  for (const std::string& name : f.also_failing) also.push_back(names.tensor(name, is_parallel));
  for (const std::string& name : f.ops) ops.push_back(names.parallel_op(name));
  return {{"kind", f.kind},
          {"tensors", tensors},
          {"also", also},
          {"ops", ops},
          {"elements", f.elements},
          {"counterexample", encode_counterexample(names, f.counterexample)},
          {"message", encode_message(names, f)}};
}

// Decoding: any structural surprise throws and becomes nullopt.
struct BadEncoding : std::runtime_error {
  using std::runtime_error::runtime_error;
};

const StageTensor& tensor_at(const Stage& stage, const json& index) {
  int64_t i = index.get<int64_t>();
  if (i < 0 || i >= static_cast<int64_t>(stage.tensors.size())) throw BadEncoding("tensor index");
  return stage.tensors[i];
}

json decode_counterexample(const Stage& stage, const json& cx) {
  if (!cx.is_object()) return cx;
  json out = json::object();
  for (const auto& [key, value] : cx.items()) {
    if (key == kFullSizeKey && value.is_object()) {
      out[key] = decode_counterexample(stage, value);
      continue;
    }
    const NamedTable* table = named_table(key);
    if (table == nullptr || !value.is_object()) {
      out[key] = value;
      continue;
    }
    json named = json::object();
    for (const auto& [position, tensor] : value.items()) {
      if (position.size() < 2 || position[0] != '#') throw BadEncoding("table key");
      const StageTensor& t = tensor_at(stage, json(std::stoll(position.substr(1))));
      if (!table->fits(t)) throw BadEncoding("table tensor");
      named[t.name] = tensor;
    }
    out[key] = std::move(named);
  }
  return out;
}

Finding decode_finding(const Stage& stage, const json& j) {
  Finding f;
  f.kind = j.at("kind").get<std::string>();
  f.stage = stage_label(stage);
  f.tensor = stage.tensors.at(stage.target).name;
  auto parallel_names = [&](const json& positions, std::vector<std::string>& names) {
    for (const json& t : positions) {
      const StageTensor& st = tensor_at(stage, t);
      if (!st.parallel) throw BadEncoding("claiming tensor");
      names.push_back(st.name);
    }
  };
  parallel_names(j.at("tensors"), f.parallel_tensors);
  parallel_names(j.at("also"), f.also_failing);
  for (const json& o : j.at("ops")) {
    int64_t i = o.get<int64_t>();
    if (i < 0 || i >= static_cast<int64_t>(stage.ops.size()) || !stage.ops[i].parallel)
      throw BadEncoding("op index");
    f.ops.push_back(stage.ops[i].display_name);
  }
  f.elements = j.at("elements").get<std::vector<std::vector<int64_t>>>();
  f.counterexample = decode_counterexample(stage, j.at("counterexample"));
  const json& message = j.at("message");
  if (message.contains("text")) {
    f.message = message.at("text").get<std::string>();
  } else {
    std::optional<std::string> label =
        claim_label(message.at("label").get<int>(), f.parallel_tensors);
    if (!label) throw BadEncoding("message label");
    f.message = *label + " differs from " + f.tensor + message.at("rest").get<std::string>();
  }
  return f;
}

json finding_json(const Finding& f) {
  return {{"kind", f.kind},         {"stage", f.stage},
          {"tensor", f.tensor},     {"parallel_tensors", f.parallel_tensors},
          {"also", f.also_failing}, {"elements", f.elements},
          {"ops", f.ops},           {"cx", f.counterexample},
          {"message", f.message}};
}

bool same_outcome(const StageOutcome& a, const StageOutcome& b) {
  if (a.status != b.status || a.trivial != b.trivial || a.queries != b.queries ||
      a.findings.size() != b.findings.size())
    return false;
  for (size_t i = 0; i < a.findings.size(); ++i)
    if (finding_json(a.findings[i]) != finding_json(b.findings[i])) return false;
  return true;
}

}  // namespace

std::optional<std::string> encode_outcome(const Stage& stage, const StageOutcome& outcome) {
  if (outcome.status != StageStatus::Proven && outcome.status != StageStatus::Refuted)
    return std::nullopt;
  if (stage.target < 0 || stage.target >= static_cast<int>(stage.tensors.size()))
    return std::nullopt;
  std::string bytes;
  try {
    StageNames names(stage);
    json findings = json::array();
    for (const Finding& f : outcome.findings) findings.push_back(encode_finding(stage, names, f));
    json j = {{"codec", kOutcomeCodecVersion},
              {"status", outcome.status == StageStatus::Proven ? "proven" : "refuted"},
              {"trivial", outcome.trivial},
              {"queries", outcome.queries},
              {"seconds", outcome.seconds},
              {"findings", std::move(findings)}};
    bytes = j.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const NotEncodable&) {
    return std::nullopt;
  } catch (const json::exception&) {
    return std::nullopt;
  }
  // The promise in the header: what is shared decodes to what was solved.
  std::optional<StageOutcome> back = decode_outcome(stage, bytes);
  if (!back || !same_outcome(*back, outcome)) return std::nullopt;
  return bytes;
}

std::optional<StageOutcome> decode_outcome(const Stage& stage, const std::string& bytes) {
  return decode_outcome([&]() -> const Stage& { return stage; }, bytes);
}

std::optional<StageOutcome> decode_outcome(const std::function<const Stage&()>& stage,
                                           const std::string& bytes) {
  json j = json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    if (j.at("codec").get<int>() != kOutcomeCodecVersion) return std::nullopt;
    StageOutcome out;
    std::string status = j.at("status").get<std::string>();
    if (status == "proven")
      out.status = StageStatus::Proven;
    else if (status == "refuted")
      out.status = StageStatus::Refuted;
    else
      return std::nullopt;
    out.trivial = j.at("trivial").get<bool>();
    out.queries = j.at("queries").get<int64_t>();
    out.seconds = j.at("seconds").get<double>();
    for (const json& f : j.at("findings")) out.findings.push_back(decode_finding(stage(), f));
    return out;
  } catch (const std::exception&) {  // json type errors, std::stoll, BadEncoding
    return std::nullopt;
  }
}

}  // namespace shardproof
