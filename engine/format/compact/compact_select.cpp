// The part of a compact plan's expansion that the class verifier selected,
// read back as a v1 parallel graph (compact_expand.h).
#include <stdexcept>

#include "engine/format/compact/compact_expand.h"
#include "engine/format/v1/plan_validation.h"
#include "engine/json/json_source.h"

namespace shardproof::compact {

using plan_detail::InvalidPlan;
using plan_detail::Node;

void check_selected(const Plan& plan, const Expansion& expansion) {
  const std::string file = "<ops of " + plan.parallel.source_file + ">";
  jsonsrc::ParseResult parsed = jsonsrc::parse(expansion.text);
  if (parsed.error)
    throw std::logic_error("the checked expansion is not JSON: " + parsed.error->message);
  try {
    Graph g;
    plan_detail::read_graph(Node(*parsed.value, file), true, g);
  } catch (const InvalidPlan& e) {
    throw InvalidPlan{locate(plan.compact->graph, expansion, e.diag)};
  }
}

Plan read_selected(const Plan& plan, Expansion& expansion) {
  const CompactSource& source = *plan.compact;
  Plan sub;
  sub.format = plan.format;
  sub.name = plan.name;
  sub.meta_json = plan.meta_json;
  sub.path = plan.path;
  sub.logical = plan.logical;
  const std::string file = "<part of the expansion of " + plan.parallel.source_file + ">";
  jsonsrc::ParseResult parsed = jsonsrc::parse(expansion.text);
  // The document holds its own copies: the text goes before the graph is
  // built, the peak of a class verifier's batch.
  std::string().swap(expansion.text);
  if (parsed.error)
    throw std::logic_error("the selected expansion is not JSON: " + parsed.error->message);
  try {
    Node root(*parsed.value, file);
    plan_detail::GraphSyntax psyn = plan_detail::read_graph(root, true, sub.parallel);
    plan_detail::check_lineage(sub.logical, source.logical_syntax, sub.parallel, psyn,
                               plan_detail::LineageScope::Stages);
  } catch (const InvalidPlan& e) {
    throw InvalidPlan{locate(source.graph, expansion, e.diag)};
  }
  sub.parallel.source_file = plan.parallel.source_file;
  return sub;
}

}  // namespace shardproof::compact
