// The two graphs the transformer builder writes into: v1 (through
// GraphBuilder, rank by rank) and compact (through CompactBuilder, one
// program per pipeline stage, and one on every stage for what spans them).
#include <map>
#include <optional>
#include <stdexcept>

#include "planner/compact_builder.h"
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

Shape extent(const SymSlice& slice) {
  Shape shape;
  for (const auto& [lo, hi] : slice) shape.push_back((hi - lo).value());
  return shape;
}

Graph::When::When(Graph& g, const std::string& condition) : g_(g), saved_(g.when_) {
  g.when_ = all_of({g.when_, condition});
}

namespace {

class V1Graph : public Graph {
 public:
  V1Graph(GraphBuilder& g, const Layout& s) : g_(g), s_(s) {}
  bool compact() const override { return false; }

  void tensor(const Coord& x, const std::string& name, const Shape& shape,
              std::optional<SymClaim> of, const std::string& dtype) override {
    if (s_.logical) {
      g_.tensor(name, shape, -1, std::nullopt, dtype);
      return;
    }
    std::optional<Claim> claim;
    if (of) {
      Slice slice;
      for (const auto& [lo, hi] : of->slice) slice.push_back({lo.value(), hi.value()});
      std::vector<OverBlocks> over;
      for (const SymClaim::Over& o : of->over)
        over.push_back({o.lo.value(), o.hi.value(), o.step, o.count});
      claim = Claim{of->tensor, std::move(slice), of->k.value(), of->n, std::move(over)};
    }
    g_.tensor(name, shape, s_.rank(x.d, x.c, x.t, x.p), std::move(claim), dtype);
  }
  void input(const std::string& name) override { g_.input(name); }
  void output(const std::string& name) override { g_.output(name); }
  void op(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out, nlohmann::json attrs) override {
    g_.op(name, op, std::move(in), std::move(out), std::move(attrs));
  }
  void collective(const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, const Group& group, nlohmann::json attrs) override {
    g_.collective(name, op, std::move(in), std::move(out), group.ranks, std::move(attrs));
  }
  void send(const std::string& name, const Coord& from, const Coord& to, const std::string& in,
            const std::string& out) override {
    g_.collective(name, "send", {in}, {out},
                  {s_.rank(from.d, from.c, from.t, from.p), s_.rank(to.d, to.c, to.t, to.p)});
  }
  bool has_tensor(const std::string& name) const override { return g_.has_tensor(name); }
  const Shape& shape(const std::string& name) const override { return g_.shape(name); }

 private:
  GraphBuilder& g_;
  const Layout& s_;
};

class CompactGraph : public Graph {
 public:
  CompactGraph(CompactBuilder& g, const Layout& s) : g_(g), stages_(s.pp) {
    for (int p = 0; p < s.pp; ++p)
      g_.program("stage" + std::to_string(p), "pp == " + std::to_string(p));
  }
  bool compact() const override { return true; }

  void tensor(const Coord& x, const std::string& name, const Shape& shape,
              std::optional<SymClaim> of, const std::string& dtype) override {
    std::optional<ClaimTemplate> claim;
    if (of) {
      std::vector<ExprRange> slice;
      for (const auto& [lo, hi] : of->slice) slice.push_back({lo.expr(), hi.expr()});
      std::vector<ClaimTemplate::Over> over;
      for (const SymClaim::Over& o : of->over)
        over.push_back({o.lo.expr(), o.hi.expr(), o.step, o.count});
      claim = ClaimTemplate{of->tensor, std::move(slice), of->k.expr(), of->n, std::move(over)};
    }
    const size_t program = program_at(x.p);
    g_.select(program);
    size_t index = g_.tensor({name, shape, std::move(claim), when_, false, false, dtype});
    tensors_[name] = {program, index, shape};
  }
  void input(const std::string& name) override { mark(name, "input"); }
  void output(const std::string& name) override { mark(name, "output"); }
  void op(const std::string& name, const std::string& op, std::vector<std::string> in,
          std::vector<std::string> out, nlohmann::json attrs) override {
    g_.select(program_of(out, in));
    g_.op(name, op, std::move(in), std::move(out), std::move(attrs), when_);
  }
  void collective(const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, const Group& group, nlohmann::json attrs) override {
    if (in.size() != 1 || out.size() != 1 || !group.ranks.empty())
      throw std::logic_error("planner internal error: compact collective '" + name +
                             "' is not one member's in and out over axes");
    g_.select(program_of(out, in));
    g_.collective(name, op, in[0], out[0], group.axes, std::move(attrs), when_);
  }
  void send(const std::string& name, const Coord& from, const Coord& to, const std::string& in,
            const std::string& out) override {
    g_.select(program_at(from.p));
    g_.send(name, in, out, {{"pp", to.p - from.p}}, when_);
  }
  bool has_tensor(const std::string& name) const override { return tensors_.count(name) > 0; }
  const Shape& shape(const std::string& name) const override { return find(name).shape; }

 private:
  struct Where {
    size_t program = 0, index = 0;
    Shape shape;
  };
  const Where& find(const std::string& name) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end())
      throw std::logic_error("planner internal error: tensor template '" + name +
                             "' used before it is declared");
    return it->second;
  }
  // An op belongs to the program of its tensors. A name may also be one
  // instance of a template ("acc3" of "acc{mb}"): it is not looked up.
  size_t program_of(const std::vector<std::string>& a, const std::vector<std::string>& b) const {
    for (const auto* list : {&a, &b})
      for (const std::string& name : *list)
        if (auto it = tensors_.find(name); it != tensors_.end()) return it->second.program;
    throw std::logic_error("planner internal error: op on undeclared tensors (" +
                           (a.empty() ? b.at(0) : a[0]) + ")");
  }
  // The flag goes on the template declared last under that name (a tensor
  // whose instances differ is declared once per condition).
  void mark(const std::string& name, const std::string& flag) {
    const Where& w = find(name);
    g_.mark(w.program, w.index, flag);
  }

  // Stage p's program, or (kEveryStage) the program on every stage, made
  // when first used.
  size_t program_at(int p) {
    if (p != kEveryStage) return size_t(p);
    if (!every_stage_) {
      every_stage_ = g_.program("every stage", "");
      if (*every_stage_ != size_t(stages_))
        throw std::logic_error("planner internal error: the every-stage program is not last");
    }
    return *every_stage_;
  }

  CompactBuilder& g_;
  int stages_;
  std::optional<size_t> every_stage_;
  std::map<std::string, Where> tensors_;
};

}  // namespace

namespace {

// The training-step bugs the compact form writes: the norm's own
// (transformer_clip.cpp) and a dp sync on the tp group.
bool compact_step_bug(const std::string& bug) {
  for (const char* name : {"clip-norm-local-shard", "clip-norm-replicated-counted-tp",
                           "clip-norm-missing-pp", "dp-grad-on-tp-group"})
    if (bug == name) return true;
  return false;
}

}  // namespace

std::string compact_unsupported(const Layout& s) {
  // The tied table's gradient is summed over the first and the last stage
  // only: not a whole line of the mesh, so not a group of axes.
  if (s.tie && s.pp > 1) return "--tie-embeddings with pp > 1";
  // The dropout bugs pick their tp ranks in the expanded form only.
  for (const char* bug : {"dropout-rng-replicated-differs", "dropout-rng-sharded-same"})
    if (s.c.bug == bug) return "--bug " + s.c.bug;
  // Megatron's expert mesh re-factoring tp x dp where its ep rank is no
  // number over mesh axes (transformer_mesh.h); the token splits gathered
  // in reverse order (the compact form orders a group's members by their
  // coordinates).
  if (std::string why = CompactMesh::unsupported(s); !why.empty()) return why;
  if (s.c.bug == "etp-split-gather-reversed") return "--bug " + s.c.bug;
  // The training-step bugs (step_bugs.cpp) are written into the expanded
  // form only, but for those compact_step_bug names.
  for (const BugSpec& b : step_bug_table())
    if (s.c.bug == b.info.name && !compact_step_bug(s.c.bug)) return "--bug " + s.c.bug;
  // An MoE bug whose hook lives in step_bugs.cpp: expanded form only too.
  if (s.c.bug == "expert-grad-scaled-by-dp") return "--bug " + s.c.bug;
  // A gather in reverse rank order: the compact form orders a group's
  // members by their coordinates.
  for (const char* order : {"reshard-gather-order", "sp-allgather-order", "zero-allgather-order",
                            "cp-kv-allgather-order", "all-to-all-wrong-order"})
    if (s.c.bug == order) return "--bug " + s.c.bug;
  // The expert mesh (ep < dp) has the axes dp and ep, but the shard a bug
  // keeps at d % edp is not affine in them.
  if (s.c.bug == "zero-expert-shard-dp-rank") return "--bug " + s.c.bug;
  // MoE under sp or cp: the bugs whose rank is not affine in the tp or cp
  // axis (the next rank's piece or chunk), or that pick their rank in the
  // expanded form only (moe_fires).
  for (const char* bug :
       {"moe-sp-dispatch-local-tokens", "moe-sp-combine-wrong-piece", "moe-cp-dispatch-local-chunk",
        "moe-cp-combine-wrong-chunk", "moe-cp-expert-grad-all-slots"})
    if (s.c.bug == bug) return "--bug " + s.c.bug;
  // A kv head shared by several tp ranks is head t / replicas: not affine.
  if (s.tp > s.NKV)
    return "tp (" + std::to_string(s.tp) + ") above the kv heads (" + std::to_string(s.NKV) + ")";
  return "";
}

std::unique_ptr<Graph> v1_graph(GraphBuilder& g, const Layout& s) {
  return std::make_unique<V1Graph>(g, s);
}

std::unique_ptr<Graph> compact_graph(CompactBuilder& g, const Layout& s) {
  return std::make_unique<CompactGraph>(g, s);
}

}  // namespace shardproof::planner::transformer
