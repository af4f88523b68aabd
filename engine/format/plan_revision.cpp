#include "engine/format/plan_revision.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "engine/format/v1/plan_validation.h"
#include "engine/json/json_source.h"

namespace shardproof {
namespace {

// An op element sits in the root object, a graph object and "ops": the full
// reader's depth limit, less those three, holds for the element alone.
constexpr int kOpElementDepth = 3;

struct Element {
  TextSpan span;
  bool parallel;
  int index;
};

// Both graphs' op elements in text order.
std::vector<Element> elements_in_order(const PlanOutline& o) {
  std::vector<Element> all;
  all.reserve(o.logical_ops.size() + o.parallel_ops.size());
  for (size_t i = 0; i < o.logical_ops.size(); ++i)
    all.push_back({o.logical_ops[i], false, static_cast<int>(i)});
  for (size_t i = 0; i < o.parallel_ops.size(); ++i)
    all.push_back({o.parallel_ops[i], true, static_cast<int>(i)});
  std::sort(all.begin(), all.end(),
            [](const Element& a, const Element& b) { return a.span.begin < b.span.begin; });
  return all;
}

bool same_bytes(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// Whether the texts agree outside their op elements; fills the elements that
// differ. Both outlines have the same number of ops in each graph.
bool compare_texts(std::string_view old_text, const PlanOutline& old_outline,
                   std::string_view new_text, const PlanOutline& new_outline,
                   std::vector<Element>& changed) {
  const std::vector<Element> olds = elements_in_order(old_outline);
  const std::vector<Element> news = elements_in_order(new_outline);
  size_t old_at = 0, new_at = 0;  // ends of the previous elements
  for (size_t k = 0; k < olds.size(); ++k) {
    const Element& o = olds[k];
    const Element& n = news[k];
    if (o.parallel != n.parallel || o.index != n.index) return false;
    if (!same_bytes(old_text.substr(old_at, o.span.begin - old_at),
                    new_text.substr(new_at, n.span.begin - new_at)))
      return false;
    if (!same_bytes(old_text.substr(o.span.begin, o.span.size()),
                    new_text.substr(n.span.begin, n.span.size())))
      changed.push_back(n);
    old_at = o.span.end;
    new_at = n.span.end;
  }
  return same_bytes(old_text.substr(old_at), new_text.substr(new_at));
}

// The edited op read alone, if it passes every one-op rule and keeps what
// the rules across ops read.
std::optional<Op> reread(const std::string& element, Graph& graph, int index) {
  jsonsrc::ParseResult parsed = jsonsrc::parse(element, jsonsrc::kMaxDepth - kOpElementDepth);
  if (!parsed.value) return std::nullopt;
  const Op& before = graph.ops[static_cast<size_t>(index)];
  try {
    Op op =
        plan_detail::reread_op(plan_detail::Node(*parsed.value, graph.source_file), graph, index);
    if (op.name != before.name || op.in != before.in || op.out != before.out ||
        op.group != before.group || op.rank != before.rank)
      return std::nullopt;
    return op;
  } catch (const plan_detail::InvalidPlan&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<ParsedPlanText> keep_parsed_text(std::string text, Plan plan) {
  // A compact (1.1) text is not the graph it denotes: op-by-op rereading of
  // its edits does not apply, every edit is read in full.
  if (plan.format != "shardproof-plan/1") return std::nullopt;
  std::optional<PlanOutline> outline = outline_plan(text);
  if (!outline || outline->logical_ops.size() != plan.logical.ops.size() ||
      outline->parallel_ops.size() != plan.parallel.ops.size())
    return std::nullopt;
  return ParsedPlanText{std::move(text), std::move(*outline), std::move(plan)};
}

std::optional<OpEdits> reread_edited(ParsedPlanText& previous, std::string& text) {
  std::optional<PlanOutline> outline = outline_plan(text);
  if (!outline || outline->logical_ops.size() != previous.outline.logical_ops.size() ||
      outline->parallel_ops.size() != previous.outline.parallel_ops.size())
    return std::nullopt;
  std::vector<Element> changed;
  if (!compare_texts(previous.text, previous.outline, text, *outline, changed)) return std::nullopt;

  // A restricted claim ("over") reads its logical tensor's producer: kind,
  // attributes, operand shapes. An edit of such a producer is read in full,
  // where the claim is checked again.
  if (std::any_of(changed.begin(), changed.end(), [](const Element& e) { return !e.parallel; })) {
    std::set<int> restricted;
    for (const TensorDecl& t : previous.plan.parallel.tensors)
      if (t.of && !t.of->over.empty())
        restricted.insert(previous.plan.logical.producer[t.of->logical]);
    for (const Element& e : changed)
      if (!e.parallel && restricted.count(e.index)) return std::nullopt;
  }

  std::vector<Op> edited;
  edited.reserve(changed.size());
  for (const Element& e : changed) {
    Graph& g = e.parallel ? previous.plan.parallel : previous.plan.logical;
    std::optional<Op> op = reread(text.substr(e.span.begin, e.span.size()), g, e.index);
    if (!op) return std::nullopt;
    edited.push_back(std::move(*op));
  }
  // In place, and back out if the plan-wide rule fails.
  auto swap_in = [&] {
    for (size_t k = 0; k < changed.size(); ++k) {
      Graph& g = changed[k].parallel ? previous.plan.parallel : previous.plan.logical;
      std::swap(g.ops[static_cast<size_t>(changed[k].index)], edited[k]);
    }
  };
  swap_in();
  if (plan_detail::find_map_arity_conflict({&previous.plan.logical, &previous.plan.parallel})) {
    swap_in();
    return std::nullopt;
  }
  OpEdits edits;
  for (const Element& e : changed) (e.parallel ? edits.parallel : edits.logical).push_back(e.index);
  std::sort(edits.logical.begin(), edits.logical.end());
  std::sort(edits.parallel.begin(), edits.parallel.end());
  previous.outline = std::move(*outline);
  previous.text.swap(text);
  return edits;
}

}  // namespace shardproof
