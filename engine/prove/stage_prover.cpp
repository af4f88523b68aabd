#include "engine/prove/stage_prover.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include "engine/ops/algebra.h"
#include "engine/prove/bounded_check.h"
#include "engine/prove/counterexample.h"
#include "engine/prove/independent_parts.h"
#include "engine/prove/lifted_values.h"
#include "engine/prove/solve_abandonable.h"
#include "engine/prove/stage_testing.h"
#include "engine/prove/sweep.h"
#include "engine/prove/thread_context.h"
#include "engine/stage/stage_claims.h"

namespace shardproof {
namespace {

using Clock = std::chrono::steady_clock;

// A solver's limits; 0: the options' own.
struct Budget {
  unsigned timeout_ms = 0;
  uint64_t rlimit = 0;
};
// The whole claim's first try: rlimit/128 (156K of the default 20M) is
// about a CPU second of nonlinear search, 1.6x the most any whole claim of
// the examples, the generated families and the GPT block needed; Z3 4.8
// counts its nonlinear steps slowly, so half the default already costs 20 s.
constexpr unsigned kFirstTryRlimitShare = 128;
constexpr unsigned kFirstTryTimeoutShare = 32;

// A leaf name "L<t>_<i>" belongs to logical stage tensor t.
int leaf_tensor(const std::string& name) {
  if (name.empty() || name[0] != 'L') return -1;
  return std::stoi(name.substr(1, name.find('_') - 1));
}

z3::expr leaf_const(z3::context& ctx, const std::string& name, DClass cls) {
  switch (cls) {
    case DClass::Real:
      return ctx.real_const(name.c_str());
    case DClass::Int:
      return ctx.int_const(name.c_str());
    case DClass::Bool:
      return ctx.bool_const(name.c_str());
  }
  throw std::logic_error("bad dclass");
}

struct IrrationalValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A model value as an exact rational (booleans as 0/1).
Rational to_rational(const z3::expr& value) {
  if (value.is_true()) return 1;
  if (value.is_false()) return 0;
  if (value.is_numeral()) {
    std::string text = Z3_get_numeral_string(value.ctx(), value);
    if (auto r = parse_exact_number(text)) return *r;
  }
  throw IrrationalValue("model value " + value.to_string() + " is not rational");
}

z3::expr to_z3(z3::context& ctx, const Rational& r) {
  return ctx.real_val(rational_to_string(r).c_str());
}

// Uninterpreted functions as the solver's model defines them.
class ModelFunctions : public FunctionTable {
 public:
  ModelFunctions(z3::model& model, const std::map<std::string, z3::func_decl>& decls)
      : model_(model), decls_(decls) {}
  Rational call(const std::string& fn, const std::vector<Rational>& args) override {
    const z3::func_decl& decl = decls_.at(fn);
    z3::expr_vector z3_args(decl.ctx());
    for (const Rational& a : args) z3_args.push_back(to_z3(decl.ctx(), a));
    return to_rational(model_.eval(decl(z3_args), true));
  }

 private:
  z3::model& model_;
  const std::map<std::string, z3::func_decl>& decls_;
};

Finding base_finding(const Stage& stage) {
  Finding f;
  f.stage = "stage " + std::to_string(stage.id) + ": " + stage.title;
  f.tensor = stage.tensors[stage.target].name;
  return f;
}

StageOutcome& unknown_outcome(const Stage& stage, StageOutcome& out, const std::string& why) {
  Finding f = base_finding(stage);
  f.kind = "unknown";
  f.message = why;
  out.findings.push_back(f);
  out.status = StageStatus::Unknown;
  return out;
}

// What is decided before any solver call (no Z3 context is made for it: making
// one costs about as much as solving a small stage): a stage too large for
// the solver is tested or unknown; any other is refuted if testing finds a
// difference. nullopt: the solver decides.
// `in_domain` is set when a trial ran the whole stage inside the plan's
// domain (stage_testing.h).
std::optional<StageOutcome> decided_by_testing(const Stage& stage, const ProverOptions& options,
                                               bool* in_domain) {
  StageOutcome out;
  const int64_t elements = stage.element_count();
  if (elements > options.max_stage_elements) {
    // Too large to prove, perhaps not to refute (wrong-offset bugs keep
    // their contradicting lines whole): a concrete mismatch is a witness.
    if (options.test_trials > 0 && elements <= options.max_test_elements) {
      // Testing is all there is here: ids aimed at the stage's bounds too.
      std::shared_ptr<const ReducedValues> values;
      if (std::optional<Finding> found = refute_by_testing(
              stage, options.test_trials, /*aim_at_constants=*/true, &values, in_domain)) {
        out.findings.push_back(*found);
        out.values = {values};
        out.status = StageStatus::Refuted;
        return out;
      }
    }
    return unknown_outcome(stage, out,
                           "the stage has " + std::to_string(elements) +
                               " elements after shape reduction (limit " +
                               std::to_string(options.max_stage_elements) + ")" +
                               (stage.reduction_note.empty() ? "" : "; " + stage.reduction_note));
  }
  if (options.test_trials > 0) {
    std::shared_ptr<const ReducedValues> values;
    if (std::optional<Finding> found = refute_by_testing(
            stage, options.test_trials, /*aim_at_constants=*/false, &values, in_domain)) {
      out.findings.push_back(*found);
      out.values = {values};
      out.status = StageStatus::Refuted;
      return out;
    }
  }
  return std::nullopt;
}

class Prover {
 public:
  // `in_domain`: testing ran the stage inside the plan's domain, so its
  // assumptions hold together (no solver call needed to show it).
  Prover(const Stage& stage, const ProverOptions& options, bool in_domain)
      : stage_(stage), options_(options), in_domain_(in_domain), alg_(ctx_) {}

  // The solver's part: testing (decided_by_testing) found nothing.
  StageOutcome run() {
    StageOutcome out;
    auto leaf = [this](const std::string& name, DClass cls) {
      z3::expr v = leaf_const(ctx_, name, cls);
      int t = leaf_tensor(name);
      if (t >= 0 && stage_.tensors[t].logical_input) alg_.trust_as_index(v);
      return v;
    };
    std::vector<const StageOp*> assumed_by;  // the op that recorded each assumption
    auto record = [&](const StageOp& op) { assumed_by.resize(alg_.assumptions().size(), &op); };
    StageValues<Z3Algebra> values = evaluate_stage<Z3Algebra>(alg_, stage_, leaf, record);
    values_ = &values;
    if (const StageOp* op = divides_by_zero_everywhere(assumed_by))
      return undefined_everywhere(out, *op);
    bool any_unsat = false;
    for (const ClaimChecks<z3::expr>& claim : build_claims(alg_, stage_, values)) {
      if (!claim.missing.empty()) return unknown(out, claim.label + ": " + claim.missing);
      const ClaimResult result = decide_claim(claim, out);
      if (result == ClaimResult::Stop) return out;
      any_unsat = any_unsat || result == ClaimResult::Proven;
    }
    if (out.status != StageStatus::Refuted && !alg_.obligations().empty()) {
      const std::optional<bool> valid = indices_valid(out);
      if (!valid) return unknown(out, "the solver gave up on index validity");
      any_unsat = any_unsat || *valid;
    }
    if (out.status == StageStatus::Refuted) return out;
    // A proof under assumptions that cannot hold together would be vacuous.
    // Values that ran the stage inside its domain satisfy them all at once.
    if (any_unsat && !alg_.assumptions().empty() && !in_domain_) {
      ++out.queries;
      z3::solver solver = make_solver();
      const z3::check_result together = check(solver, Budget{});
      if (together == z3::unsat)
        return unknown(out,
                       "the stage's assumptions (nonzero denominators, valid indices) "
                       "cannot hold together, so its proof would be vacuous");
      if (together != z3::sat)
        return unknown(out,
                       "the solver gave up showing that the stage's assumptions (nonzero "
                       "denominators, valid indices) can hold together, and no random values "
                       "satisfied them all");
    }
    out.trivial = out.queries == 0;
    out.status = StageStatus::Proven;
    return out;
  }

 private:
  // Trivial: every element's difference normalised to zero (no query);
  // Proven: the query is unsat; Refuted: its finding is in `out` (the
  // other claims still run); Stop: `out` is decided (unknown, or a replay
  // that failed).
  enum class ClaimResult { Trivial, Proven, Refuted, Stop };

  ClaimResult decide_claim(const ClaimChecks<z3::expr>& claim, StageOutcome& out) {
    z3::expr_vector differs(ctx_);
    std::vector<std::optional<z3::expr>> differences;  // arithmetic elements' differences
    std::vector<const ElementCheck<z3::expr>*> pending;
    for (const ElementCheck<z3::expr>& check : claim.checks) {
      if (z3::eq(check.parallel, check.logical)) continue;  // the same term: nothing to normalise
      std::optional<z3::expr> difference;
      if (!check.parallel.is_bool()) difference = normal_difference(check);
      z3::expr neq =
          difference ? (*difference != 0).simplify() : (check.parallel != check.logical).simplify();
      if (neq.is_false() || proven_.count(neq.id())) continue;
      differs.push_back(neq);
      differences.push_back(difference);
      pending.push_back(&check);
    }
    if (differs.empty()) return ClaimResult::Trivial;
    // Most claims fall to the whole query at once. One that does not is
    // usually the kind the element pass takes apart (a softmax row, an
    // embedding-gradient row), where the whole query's full budget is
    // wasted; so it first gets a slice, then the element pass, and only
    // then everything.
    const Budget first{options_.timeout_ms / kFirstTryTimeoutShare,
                       options_.rlimit / kFirstTryRlimitShare};
    z3::solver solver = claim_query(z3::mk_or(differs), out, first);
    std::string why;
    z3::check_result result = check(solver, first, &why);
    if (result == z3::unknown)
      result = each_element(differs, differences, pending, out, solver, why);
    if (result == z3::unknown) {
      solver = claim_query(z3::mk_or(differs), out);
      std::string whole_why;
      result = check(solver, Budget{}, &whole_why);
      if (result == z3::unknown) why = whole_why + "; " + why;
    }
    if (result == z3::unsat) {
      for (const z3::expr& neq : differs) remember_proven(neq);
      return ClaimResult::Proven;
    }
    if (result == z3::unknown) {
      unknown(out, "the solver gave up on " + claim.label + " (" + why +
                       "); raise --rlimit or --timeout-ms to try harder");
      return ClaimResult::Stop;
    }
    z3::model model = solver.get_model();
    out.status = StageStatus::Refuted;
    return refute(out, claim, pending, model) ? ClaimResult::Refuted : ClaimResult::Stop;
  }

  // The first op whose denominator normalises to 0: it divides by zero for
  // every input, so every query of the stage would be vacuous. Checked
  // before the claims, whose differences can take the normaliser long on
  // such a stage (0/0 terms do not cancel).
  const StageOp* divides_by_zero_everywhere(const std::vector<const StageOp*>& assumed_by) {
    const std::vector<z3::expr>& assumptions = alg_.assumptions();
    for (size_t i = 0; i < assumptions.size() && i < assumed_by.size(); ++i)
      if (assumptions[i].simplify().is_false()) return assumed_by[i];
    return nullptr;
  }

  StageOutcome& undefined_everywhere(StageOutcome& out, const StageOp& op) {
    unknown(out, std::string(op.parallel ? "the parallel" : "the logical") + " op " +
                     op.display_name +
                     " divides by zero for every input (torch computes NaN or inf there: a "
                     "softmax over a row masked everywhere?); the plan contract assumes "
                     "denominators nonzero, so this stage has nothing to prove");
    Finding& f = out.findings.back();
    if (op.parallel)
      f.ops = {op.display_name};
    else if (!op.out.empty())
      f.tensor = stage_.tensors[op.out.front()].name;
    return out;
  }

  // Whether every computed index is in range (a finding in `out` when not);
  // nullopt when the solver gave up.
  std::optional<bool> indices_valid(StageOutcome& out) {
    ++out.queries;
    z3::solver solver = make_solver();
    z3::expr_vector obligations(ctx_);
    for (const z3::expr& o : alg_.obligations()) obligations.push_back(o);
    solver.add(!z3::mk_and(obligations));
    const z3::check_result result = check(solver, Budget{});
    if (result == z3::unknown) return std::nullopt;
    if (result == z3::unsat) return true;
    Finding f = base_finding();
    f.kind = "mismatch";
    f.message = "a computed index may fall outside the tensor it indexes";
    out.findings.push_back(f);
    out.status = StageStatus::Refuted;
    return false;
  }

  // SHARDPROOF_DUMP_SMT=DIR writes every claim query as SMT-LIB 2, for
  // debugging a slow or surprising stage with the z3 command line.
  void dump_query(z3::solver& solver, int64_t n) const {
    const char* dir = std::getenv("SHARDPROOF_DUMP_SMT");
    if (!dir) return;
    std::ofstream(std::string(dir) + "/stage-" + std::to_string(stage_.id) + "-" +
                  std::to_string(n) + ".smt2")
        << solver.to_smt2();
  }

  // The claim undecided as a whole: element by element (the disjunction is
  // unsat exactly when every element's difference is), each element first
  // as its independent parts (independent_parts.h). One element (a row of a
  // softmax, a vocabulary row of an embedding gradient) is small where all
  // of them at once are not. The pass gets the query's wall-clock budget
  // again. On sat, `solver` is the solver that holds the model.
  z3::check_result each_element(const z3::expr_vector& differs,
                                const std::vector<std::optional<z3::expr>>& differences,
                                const std::vector<const ElementCheck<z3::expr>*>& pending,
                                StageOutcome& out, z3::solver& solver, std::string& why) {
    const Clock::time_point deadline =
        options_.timeout_ms > 0 ? Clock::now() + std::chrono::milliseconds(options_.timeout_ms)
                                : Clock::time_point::max();
    auto budget = [&]() { return time_left(deadline); };
    std::vector<z3::expr> side = alg_.assumptions();
    side.insert(side.end(), alg_.obligations().begin(), alg_.obligations().end());
    IndependentParts parts(ctx_, side);
    Substitution& sub = swept(parts, out, deadline);
    for (unsigned i = 0; i < differs.size(); ++i) {
      const std::optional<unsigned> left = budget();
      if (!left) {
        why += "; element by element, out of time";
        return z3::unknown;
      }
      z3::expr neq = differs[i];
      if (differences[i]) {
        const z3::expr d = alg_.normal_form(sub.apply(pending[i]->parallel) - pending[i]->logical);
        if (is_zero_numeral(d) || parts_unsat(parts, d, out, *left)) continue;
        neq = d != 0;
      } else if (!sub.empty()) {
        neq = (sub.apply(pending[i]->parallel) != pending[i]->logical).simplify();
        if (neq.is_false()) continue;
      }
      z3::solver single = claim_query(neq, out, Budget{*left});
      std::string single_why;
      const z3::check_result r = check(single, Budget{*left}, &single_why);
      if (r == z3::unsat) continue;
      if (r == z3::unknown) {
        why = single_why + ", element by element";
        return z3::unknown;
      }
      solver = single;
      return z3::sat;
    }
    return z3::unsat;
  }

  // The stage's sweep (sweep.h), made once, on the first claim that needs it.
  Substitution& swept(IndependentParts& parts, StageOutcome& out,
                      std::chrono::steady_clock::time_point deadline) {
    if (sweep_) return *sweep_;
    // A pair is a shortcut, never needed: one the solver finds hard gets a
    // slice of the budget, not all of it (or one pair takes the stage).
    auto proves_zero = [&](const z3::expr& difference) {
      const std::optional<unsigned> left = time_left(deadline);
      if (!left) return false;
      const unsigned slice = options_.timeout_ms / kFirstTryTimeoutShare;
      const unsigned budget = *left == 0 ? slice : std::min(*left, slice);
      return small_query(parts, difference != 0, out, budget) == z3::unsat;
    };
    sweep_.emplace(sweep_stage(stage_, *values_, alg_, proves_zero, deadline));
    return *sweep_;
  }

  // Milliseconds to `deadline` as a solver timeout, nullopt once it has
  // passed; 0 (the options' own: none) when the options set no timeout.
  std::optional<unsigned> time_left(Clock::time_point deadline) const {
    if (options_.timeout_ms == 0) return 0u;
    const int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    return static_cast<unsigned>(left);
  }

  // Whether every independent part of `difference` is zero under the side
  // conditions it shares variables with (independent_parts.h).
  bool parts_unsat(IndependentParts& parts, const z3::expr& difference, StageOutcome& out,
                   unsigned timeout_ms) {
    for (const z3::expr& part : parts.split(difference)) {
      if (small_query(parts, part != 0, out, timeout_ms) != z3::unsat) return false;
    }
    return true;
  }

  // `query` with only the side conditions connected to it: a sweep pair,
  // an element's independent part. Thousands of these are each small, so
  // they share one incremental solver (a scope each), which keeps the
  // terms it has internalised; one it gives up on gets a fresh solver.
  z3::check_result small_query(IndependentParts& parts, const z3::expr& query, StageOutcome& out,
                               unsigned timeout_ms) {
    ++out.queries;
    if (!scratch_) scratch_.emplace(bare_solver(Budget{}));
    scratch_->push();
    for (const z3::expr& condition : parts.relevant(query)) scratch_->add(condition);
    scratch_->add(query);
    z3::check_result result = check(*scratch_, Budget{timeout_ms});
    scratch_->pop();
    if (result != z3::unknown) return result;
    z3::solver fresh = bare_solver(Budget{timeout_ms});
    for (const z3::expr& condition : parts.relevant(query)) fresh.add(condition);
    fresh.add(query);
    return check(fresh, Budget{timeout_ms});
  }

  // A query for one claim: the difference `differs` with the index
  // obligations, which are proven on their own (so a model never picks
  // outside a tensor: its replay could not).
  z3::solver claim_query(const z3::expr& differs, StageOutcome& out, Budget budget = {}) {
    ++out.queries;
    z3::solver solver = make_solver(budget);
    for (const z3::expr& o : alg_.obligations()) solver.add(o);
    solver.add(differs);
    dump_query(solver, out.queries);
    return solver;
  }

  // A solver with the stage's assumptions.
  z3::solver make_solver(Budget budget = {}) {
    z3::solver solver = bare_solver(budget);
    for (const z3::expr& a : alg_.assumptions()) solver.add(a);
    return solver;
  }

  // The one way a query is asked: rlimit is the deterministic budget
  // (bare_solver); Z3 4.8 does not count every nonlinear search step against
  // it, so wall-clock time bounds every check too (bounded_check.h).
  z3::check_result check(z3::solver& solver, Budget budget, std::string* why = nullptr) {
    if (options_.timeout_ms == 0) return bounded_check(solver, 0, why);  // none
    return bounded_check(solver, budget.timeout_ms ? budget.timeout_ms : options_.timeout_ms, why);
  }

  // A solver with `budget`'s rlimit (its wall-clock limit is check()'s).
  z3::solver bare_solver(Budget budget) {
    z3::solver solver(ctx_);
    z3::params params(ctx_);
    const uint64_t rlimit = budget.rlimit ? budget.rlimit : options_.rlimit;
    params.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(rlimit, 4'000'000'000u)));
    // Z3's own SIGINT handler crashes a process that solves on threads; the
    // CLI and the daemon handle Ctrl-C themselves (cli/interrupt.h).
    params.set("ctrl_c", false);
    solver.set(params);
    return solver;
  }

  // Element differences proven zero under this stage's assumptions, by
  // term id; the terms are kept alive so an id is never reused. Ranks that
  // hold one all-reduced tensor claim the same slice with the same terms
  // (a data-parallel gradient on every dp rank): proven once, not dp times.
  void remember_proven(const z3::expr& neq) {
    if (proven_.insert(neq.id()).second) proven_terms_.push_back(neq);
  }

  Finding base_finding() const { return shardproof::base_finding(stage_); }
  StageOutcome& unknown(StageOutcome& out, const std::string& why) {
    return unknown_outcome(stage_, out, why);
  }

  // Builds the finding for a satisfying model and replays it concretely.
  // Returns false when the replay disagrees (an internal error).
  bool refute(StageOutcome& out, const ClaimChecks<z3::expr>& claim,
              const std::vector<const ElementCheck<z3::expr>*>& pending, z3::model& model) {
    Finding f = base_finding();
    f.kind = "mismatch";
    for (int t : claim.tensors) f.parallel_tensors.push_back(stage_.tensors[t].name);
    f.ops = producing_ops(stage_, claim.tensors);
    std::vector<int64_t> differing;
    for (const ElementCheck<z3::expr>* check : pending) {
      z3::expr neq = check->parallel.is_bool() ? check->parallel != check->logical
                                               : check->parallel - check->logical != 0;
      if (model.eval(neq, true).is_true()) differing.push_back(check->element);
    }
    for (size_t i = 0; i < differing.size() && i < 8; ++i)
      f.elements.push_back(full_index(stage_, differing[i]));
    f.message = claim.label + " differs from " + f.tensor + " at " +
                std::to_string(differing.size()) + " of " + std::to_string(claim.checks.size()) +
                " checked elements (reduced sizes)";
    try {
      replay(f, claim, differing, model);
    } catch (const IrrationalValue& e) {
      f.message += "; the counterexample holds irrational values, so it was not replayed";
    } catch (const EvalError& e) {
      out.status = StageStatus::InternalError;
      out.error = "stage " + std::to_string(stage_.id) +
                  ": replay of the counterexample failed: " + e.what();
      out.findings.push_back(f);
      return false;
    }
    if (f.counterexample.contains("replay_disagrees")) {
      out.status = StageStatus::InternalError;
      out.error = "stage " + std::to_string(stage_.id) +
                  ": the interpreter does not confirm the solver's counterexample for " +
                  claim.label + " (encoding and interpreter disagree)";
      out.findings.push_back(f);
      return false;
    }
    out.values.resize(out.findings.size());
    out.values.push_back(kept_values(model));
    out.findings.push_back(f);
    return true;
  }

  // The model's leaves and function tables as exact values (for a lifted
  // replay at full size); null when one is irrational. Copies only: the
  // model's context is this solving thread's.
  std::shared_ptr<const ReducedValues> kept_values(z3::model& model) {
    auto v = std::make_shared<ReducedValues>();
    try {
      std::map<std::string, Rational> leaves;
      for (unsigned i = 0; i < model.num_consts(); ++i) {
        const z3::func_decl d = model.get_const_decl(i);
        try {  // a leaf with no rational value takes 0 below
          leaves[d.name().str()] = to_rational(model.get_const_interp(d));
        } catch (const IrrationalValue&) {
        }
      }
      for (const auto& [name, decl] : alg_.functions()) {
        if (!model.has_interp(decl)) continue;
        const z3::func_interp fi = model.get_func_interp(decl);
        for (unsigned e = 0; e < fi.num_entries(); ++e) {
          const z3::func_entry entry = fi.entry(e);
          std::vector<Rational> args;
          for (unsigned a = 0; a < entry.num_args(); ++a) args.push_back(to_rational(entry.arg(a)));
          v->table[name][args] = to_rational(entry.value());
        }
        try {  // a default that is no number: testing's random function instead
          v->otherwise[name] = to_rational(fi.else_value());
        } catch (const IrrationalValue&) {
        }
      }
      // A leaf the model leaves free may take any value: 0.
      v->leaf = [leaves = std::move(leaves)](const std::string& name, DClass) {
        auto it = leaves.find(name);
        return it == leaves.end() ? Rational(0) : it->second;
      };
    } catch (const IrrationalValue&) {
      return nullptr;
    } catch (const z3::exception&) {
      return nullptr;
    }
    return v;
  }

  void replay(Finding& f, const ClaimChecks<z3::expr>& claim, const std::vector<int64_t>& differing,
              z3::model& model) {
    ModelFunctions functions(model, alg_.functions());
    ConcreteAlgebra concrete(functions);
    auto leaf = [&](const std::string& name, DClass cls) {
      return to_rational(model.eval(leaf_const(ctx_, name, cls), true));
    };
    StageValues<ConcreteAlgebra> values = evaluate_stage<ConcreteAlgebra>(concrete, stage_, leaf);
    std::vector<ClaimChecks<Rational>> claims = build_claims(concrete, stage_, values);
    const ClaimChecks<Rational>* mine = nullptr;
    for (const ClaimChecks<Rational>& c : claims)
      if (c.label == claim.label) mine = &c;
    bool confirmed = mine != nullptr && !differing.empty();
    for (size_t i = 0; mine && i < differing.size(); ++i)
      if (mine->checks[differing[i]].parallel == mine->checks[differing[i]].logical)
        confirmed = false;
    nlohmann::json cx =
        mine ? counterexample_json(stage_, values, *mine, differing) : nlohmann::json::object();
    if (!confirmed) cx["replay_disagrees"] = true;
    f.counterexample = cx;
  }

  // An element's parallel minus logical value, in sum-of-monomials form
  // while that stays quick: once one element's normal form runs out of time
  // (kNormalFormMilliseconds), the stage's others are only simplified, or a
  // stage of a thousand such elements would take minutes before its query.
  z3::expr normal_difference(const ElementCheck<z3::expr>& check) {
    const z3::expr d = check.parallel - check.logical;
    if (!normalising_) return d.simplify();
    const auto start = Clock::now();
    z3::expr n = alg_.normal_form(d);
    if (Clock::now() - start >= std::chrono::milliseconds(kNormalFormMilliseconds))
      normalising_ = false;
    return n;
  }

  const Stage& stage_;
  ProverOptions options_;
  bool in_domain_ = false;
  bool normalising_ = true;                                      // normal_difference
  std::shared_ptr<z3::context> lease_ = lease_thread_context();  // outlives every term
  z3::context& ctx_ = *lease_;
  Z3Algebra alg_;
  const StageValues<Z3Algebra>* values_ = nullptr;  // the stage's terms, once evaluated
  std::optional<Substitution> sweep_;
  std::optional<z3::solver> scratch_;    // small_query's incremental solver
  std::unordered_set<unsigned> proven_;  // remember_proven
  std::vector<z3::expr> proven_terms_;
};

}  // namespace

namespace {

// `decide()`, with an exception turned into an internal error.
template <class Decide>
StageOutcome guarded(const Stage& stage, Decide decide) {
  try {
    return decide();
  } catch (const z3::exception& e) {
    StageOutcome out;
    out.status = StageStatus::InternalError;
    out.error = "stage " + std::to_string(stage.id) + ": Z3 error: " + e.msg();
    return out;
  } catch (const std::exception& e) {
    StageOutcome out;
    out.status = StageStatus::InternalError;
    out.error = "stage " + std::to_string(stage.id) + ": " + e.what();
    return out;
  }
}

StageSolve solver_for(bool in_domain) {
  return [in_domain](const Stage& stage, const ProverOptions& options) {
    return guarded(stage, [&] { return Prover(stage, options, in_domain).run(); });
  };
}

}  // namespace

StageOutcome prove_stage(const Stage& stage, const ProverOptions& options) {
  auto start = Clock::now();
  StageOutcome out = guarded(stage, [&] {
    bool in_domain = false;
    if (std::optional<StageOutcome> decided = decided_by_testing(stage, options, &in_domain))
      return std::move(*decided);
    if (std::optional<StageOutcome> solved =
            solve_abandonable(stage, options, solver_for(in_domain)))
      return std::move(*solved);
    StageOutcome abandoned;
    return unknown_outcome(
        stage, abandoned,
        "a solver check ran past its wall-clock deadline and did not stop when interrupted "
        "(Z3 4.8 does not look for interrupts in some nonlinear search); it was abandoned " +
            std::to_string(abandon_after_ms(options)) + " ms later");
  });
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

}  // namespace shardproof
