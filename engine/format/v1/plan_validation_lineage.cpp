// Lineage ("of") of parallel tensors: structure, and the rules that tie the
// parallel graph to the logical one (inputs, outputs, coverage, part sets).
#include <algorithm>

#include "engine/core/contraction.h"
#include "engine/format/v1/lineage_rules.h"
#include "engine/format/v1/plan_validation.h"

namespace shardproof::plan_detail {
namespace {

Shape extent(const SliceSpec& slice) {
  Shape s;
  for (auto [lo, hi] : slice) s.push_back(hi - lo);
  return s;
}

// extent(slice) == shape, without building the extent: true for nearly every tensor.
bool is_extent(const Shape& shape, const SliceSpec& slice) {
  if (shape.size() != slice.size()) return false;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != slice[d].second - slice[d].first) return false;
  return true;
}

class LineageChecker {
 public:
  LineageChecker(const Graph& logical, const GraphSyntax& lsyn, Graph& par, const GraphSyntax& psyn,
                 LineageScope scope)
      : lg_(logical), lsyn_(lsyn), pg_(par), psyn_(psyn), scope_(scope) {}

  void run() {
    for (size_t t = 0; t < pg_.tensors.size(); ++t)
      if (psyn_.of_nodes[t]) pg_.tensors[t].of = read(t, *psyn_.of_nodes[t]);
    if (scope_ == LineageScope::Stages) return check_claimed_inputs();
    check_inputs();
    check_outputs();
    const LineageRules rules = plan_wide_rules();
    check_part_sets(rules);
    check_coverage(rules);
  }

 private:
  Lineage read(size_t t, const Node& n) {
    const TensorDecl& decl = pg_.tensors[t];
    auto what = [&] { return "lineage of " + quoted(decl.name); };
    expect_object(n, what);
    check_keys(n, {"tensor", "slice", "part", "over", "scale"}, what);
    Lineage lin;
    Node tn = require(n, "tensor", what, "lineage");
    lin.tensor = expect_string(
        tn, [&] { return what() + " tensor"; }, "lineage");
    int lt = lg_.find(lin.tensor);
    if (lt < 0)
      tn.fail("lineage", what() + ": the logical graph has no tensor " + quoted(lin.tensor));
    lin.logical = lt;
    const TensorDecl& logical = lg_.tensors[lt];
    lin.slice = read_slice(n.get("slice"), logical, what);
    if (std::optional<Node> part = n.get("part")) read_part(*part, what, lin);
    if (std::optional<Node> over = n.get("over")) read_over(*over, what, lin);
    if (std::optional<Node> scale = n.get("scale")) read_scale(*scale, what, decl, lin);
    check_against(t, logical, lin);
    return lin;
  }

  SliceSpec read_slice(const std::optional<Node>& n, const TensorDecl& logical, What what) {
    SliceSpec slice;
    slice.reserve(logical.shape.size());
    if (!n) {  // default: the whole logical tensor
      for (int64_t d : logical.shape) slice.push_back({0, d});
      return slice;
    }
    expect_array(
        *n, [&] { return what.str() + " slice"; }, "lineage-slice");
    if ((*n)->items.size() != logical.shape.size())
      n->fail("lineage-slice", what.str() + ": slice needs one [lo, hi] per dimension of " +
                                   quoted(logical.name) + " " + shape_to_string(logical.shape) +
                                   ", i.e. " + std::to_string(logical.shape.size()) + "; found " +
                                   std::to_string((*n)->items.size()));
    for (size_t d = 0; d < logical.shape.size(); ++d) {
      Node r = n->item(d);
      auto rw = [&] { return what.str() + " slice[" + std::to_string(d) + "]"; };
      expect_array(r, rw, "lineage-slice");
      if (r->items.size() != 2)
        r.fail("lineage-slice",
               rw() + ": expected [lo, hi], found " + std::to_string(r->items.size()) + " numbers");
      int64_t size = logical.shape[d];
      int64_t lo = expect_int(
          r.item(0), "lineage-slice", [&] { return rw() + " lo"; }, 0, size);
      int64_t hi = expect_int(
          r.item(1), "lineage-slice", [&] { return rw() + " hi"; }, lo, size);
      slice.push_back({lo, hi});
    }
    return slice;
  }

  void read_part(const Node& n, What what, Lineage& lin) {
    expect_array(
        n, [&] { return what.str() + " part"; }, "lineage-part");
    if (n->items.size() != 2)
      n.fail("lineage-part", what.str() + ": part is [k, n], found " +
                                 std::to_string(n->items.size()) + " numbers");
    lin.has_part = true;
    lin.part_n = expect_int(
        n.item(1), "lineage-part", [&] { return what.str() + " part n"; }, 1, INT64_MAX);
    lin.part_k = expect_int(
        n.item(0), "lineage-part", [&] { return what.str() + " part k"; }, 0, lin.part_n - 1);
  }

  // "over": a box inside the index box of the claimed tensor's producer,
  // which must be a contraction (engine/core/contraction.h).
  void read_over(const Node& n, What what, Lineage& lin) {
    auto ow = [&] { return what.str() + " over"; };
    if (lin.has_part) n.fail("lineage-over", ow() + ": a restricted claim cannot also be a part");
    const int producer = lg_.producer[lin.logical];
    if (producer < 0)
      n.fail("lineage-over", ow() + ": " + quoted(lin.tensor) +
                                 " is a logical input; only a contraction's output can be "
                                 "claimed over a sub-box");
    const Op& op = lg_.ops[producer];
    std::vector<Shape> shapes;
    for (int in : op.in) shapes.push_back(lg_.tensors[in].shape);
    Contraction c;
    if (std::string e = contraction_of(op.op, op.attrs, shapes, c); !e.empty())
      n.fail("lineage-over", ow() + ": " + quoted(lin.tensor) + " is computed by " +
                                 op.display_name() + ", and " + e);
    expect_array(n, ow, "lineage-over");
    if (n->items.size() != c.sizes.size())
      n.fail("lineage-over", ow() + ": " + op.display_name() + " sums over " +
                                 std::to_string(c.sizes.size()) + " index axes " +
                                 shape_to_string(c.sizes) + ", so over needs " +
                                 std::to_string(c.sizes.size()) + " [lo, hi] pairs; found " +
                                 std::to_string(n->items.size()));
    for (size_t a = 0; a < c.sizes.size(); ++a) {
      Node r = n.item(a);
      auto rw = [&] { return ow() + "[" + std::to_string(a) + "]"; };
      expect_array(r, rw, "lineage-over");
      if (r->items.size() != 2 && r->items.size() != 4)
        r.fail("lineage-over", rw() + ": expected [lo, hi] or [lo, hi, step, count], found " +
                                   std::to_string(r->items.size()) + " numbers");
      OverRange range;
      range.lo = expect_int(
          r.item(0), "lineage-over", [&] { return rw() + " lo"; }, 0, c.sizes[a] - 1);
      range.hi = expect_int(
          r.item(1), "lineage-over", [&] { return rw() + " hi"; }, range.lo + 1, c.sizes[a]);
      range.step = range.hi - range.lo;
      if (r->items.size() == 4) {
        // Blocks that do not overlap and end inside the axis.
        range.count = expect_int(
            r.item(3), "lineage-over", [&] { return rw() + " count"; }, 1, c.sizes[a]);
        range.step = expect_int(
            r.item(2), "lineage-over", [&] { return rw() + " step"; }, range.hi - range.lo,
            c.sizes[a]);
        if (range.count > 1 && (c.sizes[a] - range.hi) / (range.count - 1) < range.step)
          r.fail("lineage-over", rw() + ": " + std::to_string(range.count) + " blocks " +
                                     std::to_string(range.lo) + ":" + std::to_string(range.hi) +
                                     " every " + std::to_string(range.step) + " end past " +
                                     std::to_string(c.sizes[a]) + ", the axis size");
      }
      // One form per set: adjacent blocks are one block.
      if (range.count == 1 || range.step == range.hi - range.lo)
        range = {range.lo, range.last_hi(), range.last_hi() - range.lo, 1};
      lin.over.push_back(range);
    }
  }

  // "scale": a nonzero exact rational, a JSON number or a string "p/q";
  // kept in lowest terms, so 2, 2.0 and "4/2" are one claim. Only real
  // tensors scale (an integer's positions or a boolean cannot).
  void read_scale(const Node& n, What what, const TensorDecl& decl, Lineage& lin) {
    auto sw = [&] { return what.str() + " scale"; };
    std::optional<Rational> r;
    // A scale is small: long texts (1e99999) are refused before they cost memory.
    const bool exact_kind =
        n->is(jsonsrc::Value::Kind::Number) || n->is(jsonsrc::Value::Kind::String);
    if (exact_kind && n->text.size() <= 64 && n->text.find_first_of("eE") == std::string::npos)
      r = parse_exact_number(n->text);
    if (!r)
      n.fail("lineage-scale", sw() + ": expected a nonzero exact number (a JSON number or a " +
                                  "string such as \"1/2\"; no exponent), found " +
                                  jsonsrc::describe(n.value()));
    if (*r == 0) n.fail("lineage-scale", sw() + ": a scale is nonzero");
    constexpr int64_t kMax = int64_t{1} << 62;  // products of two stay exact in a Rational anyway
    const mpz_class& num = r->get_num();
    const mpz_class& den = r->get_den();
    if (abs(num) > kMax || den > kMax)
      n.fail("lineage-scale",
             sw() + ": " + rational_to_string(*r) + " has a numerator or denominator beyond 2^62");
    if (dclass_of(decl.dtype) != DClass::Real)
      n.fail("lineage-scale", sw() + ": only real tensors can claim a scaled value; " +
                                  quoted(decl.name) + " is " + dtype_name(decl.dtype));
    lin.scale_num = num.get_si();
    lin.scale_den = den.get_si();
  }

  // The claim keeps the dtype class and has the slice's shape.
  void check_against(size_t t, const TensorDecl& logical, const Lineage& lin) {
    const TensorDecl& decl = pg_.tensors[t];
    const Node& dn = psyn_.tensor_decls[t];
    if (dclass_of(decl.dtype) != dclass_of(logical.dtype))
      dn.get("dtype")->fail("lineage-dtype", quoted(decl.name) + " is " + dtype_name(decl.dtype) +
                                                 " (" + dclass_name(dclass_of(decl.dtype)) +
                                                 ") but claims " + quoted(logical.name) +
                                                 ", which is " + dtype_name(logical.dtype) + " (" +
                                                 dclass_name(dclass_of(logical.dtype)) + ")");
    if (!is_extent(decl.shape, lin.slice))
      dn.get("shape")->fail("lineage-shape", quoted(decl.name) + " has shape " +
                                                 shape_to_string(decl.shape) + " but claims " +
                                                 claim_text(lin) + ", whose extent is " +
                                                 shape_to_string(extent(lin.slice)));
  }

  // Rule 1: parallel inputs come from logical inputs.
  void check_inputs() {
    std::vector<bool> logical_input(lg_.tensors.size(), false);
    for (int t : lg_.inputs) logical_input[t] = true;
    for (int t : pg_.inputs) {
      const TensorDecl& decl = pg_.tensors[t];
      if (!decl.of)
        psyn_.tensor_decls[t].fail("lineage-input",
                                   "parallel input " + quoted(decl.name) +
                                       " has no lineage (\"of\"); every parallel input must "
                                       "claim a logical input");
      if (!logical_input[lg_.find(decl.of->tensor)])
        psyn_.of_nodes[t]->get("tensor")->fail(
            "lineage-input", "parallel input " + quoted(decl.name) + " claims " +
                                 quoted(decl.of->tensor) +
                                 ", which is not an input of the logical graph; every parallel "
                                 "input must claim a logical input");
    }
  }

  // A part cut out of an expansion: its inputs are claims, of any tensor.
  void check_claimed_inputs() {
    for (int t : pg_.inputs)
      if (!pg_.tensors[t].of)
        psyn_.tensor_decls[t].fail(
            "lineage-input",
            "parallel input " + quoted(pg_.tensors[t].name) + " has no lineage (\"of\")");
  }

  // Rule 2: parallel outputs say what they are.
  void check_outputs() {
    for (int t : pg_.outputs)
      if (!pg_.tensors[t].of)
        psyn_.tensor_decls[t].fail(
            "lineage-output",
            "parallel output " + quoted(pg_.tensors[t].name) + " has no lineage (\"of\")");
  }

  // The plan-wide rules (lineage_rules.h) over every claim: part sets in
  // tensor order (a broken set is reported at its first claim), plain
  // claims of outputs in output order (as the coverage message lists them).
  LineageRules plan_wide_rules() const {
    LineageRules rules;
    std::vector<bool> is_output(pg_.tensors.size(), false);
    for (int t : pg_.outputs) is_output[t] = true;
    auto fact = [&](size_t t) {
      const Lineage& lin = *pg_.tensors[t].of;
      ClaimFact f{lin.tensor, lin.slice,         lin.has_part, lin.part_k,
                  lin.part_n, !lin.over.empty(), is_output[t], t};
      f.scale_num = lin.scale_num;
      f.scale_den = lin.scale_den;
      return f;
    };
    for (size_t t = 0; t < pg_.tensors.size(); ++t)
      if (pg_.tensors[t].of && pg_.tensors[t].of->has_part) rules.add(fact(t));
    for (int t : pg_.outputs)
      if (!pg_.tensors[t].of->has_part) rules.add(fact(static_cast<size_t>(t)));
    return rules;
  }

  // Project rule: a part set that appears anywhere is complete (0..n-1).
  void check_part_sets(const LineageRules& rules) {
    std::optional<MissingPart> m = rules.first_incomplete_part_set();
    if (!m) return;
    const Lineage& of = *pg_.tensors[m->origin].of;
    Lineage missing = of;
    missing.part_k = m->missing;
    psyn_.of_nodes[m->origin]->get("part")->fail(
        "lineage-parts", quoted(pg_.tensors[m->origin].name) + " claims " + claim_text(of) +
                             ", but no parallel tensor claims " + claim_text(missing) +
                             "; a part set must be complete (parts 0.." +
                             std::to_string(of.part_n - 1) + ")");
  }

  // Rule 3: the parallel outputs cover every element of every logical output.
  void check_coverage(const LineageRules& rules) {
    std::optional<CoverageHole> h = rules.first_coverage_hole(lg_);
    if (!h) return;
    const TensorDecl& out = lg_.tensors[lg_.outputs[h->output]];
    lsyn_.outputs->item(h->output).fail("lineage-coverage",
                                        coverage_message(out, h->hole, h->covered));
  }

  std::string coverage_message(const TensorDecl& out, const std::vector<int64_t>& hole,
                               const std::vector<SliceSpec>& boxes) const {
    std::string s = "element " + shape_to_string(hole) + " of logical output " + quoted(out.name) +
                    " " + shape_to_string(out.shape) +
                    " is covered by no parallel output (plain slices, or complete part sets "
                    "among the parallel outputs); ";
    if (boxes.empty()) return s + "no parallel output covers any of it";
    s += "covered:";
    for (size_t i = 0; i < boxes.size() && i < 8; ++i) {
      Lineage l;
      l.tensor = out.name;
      l.slice = boxes[i];
      s += (i ? ", " : " ") + claim_text(l);
    }
    return s + (boxes.size() > 8 ? ", ..." : "");
  }

  const Graph& lg_;
  const GraphSyntax& lsyn_;
  Graph& pg_;
  const GraphSyntax& psyn_;
  LineageScope scope_;
};

}  // namespace

void check_lineage(const Graph& logical, const GraphSyntax& logical_syntax, Graph& parallel,
                   const GraphSyntax& parallel_syntax, LineageScope scope) {
  LineageChecker(logical, logical_syntax, parallel, parallel_syntax, scope).run();
}

}  // namespace shardproof::plan_detail
