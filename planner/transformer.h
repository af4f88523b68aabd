// Decoder-only transformer training step (Llama-3 style), internal to the
// planner: RMSNorm, grouped-query attention with rotary embedding and an
// additive causal mask (cos/sin tables and the mask are inputs), SwiGLU MLP
// with a fused gate/up weight, final norm, LM head, cross-entropy, the whole
// backward pass, then SGD or AdamW on every parameter.
//
// One builder writes both graphs: the logical graph is the same program run
// with every parallel degree 1 and no collectives (the way Megatron's modules
// run unsharded), the parallel graph runs it per rank and micro-batch on local
// shards, with the collectives of Megatron-style data, tensor, sequence,
// context and pipeline parallelism and ZeRO in between. Every local tensor
// that stands for a logical one claims its slice (and part), so the verifier
// cuts the step into small stages. The same code also writes the compact
// form (shardproof-plan/1.1), with the mesh axes as coordinates
// (transformer_graph.h).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "planner/compact_builder.h"
#include "planner/plan_builder.h"
#include "planner/planner.h"
#include "planner/transformer_graph.h"
#include "planner/transformer_mesh.h"

namespace shardproof::planner::transformer {

// A model's published shape.
struct ModelShape {
  std::string name;
  int layers = 0;
  int64_t hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
  int64_t batch = 0;  // default global batch (sequences)
  // Mixture of experts (0 experts: a dense model). Layers from first_dense on
  // replace the SwiGLU MLP by `experts` routed experts (each with `capacity`
  // token slots per sequence and ffn `expert_ffn`) plus one shared expert
  // (ffn `shared_ffn`); see moe_forward.cpp.
  int64_t experts = 0, capacity = 0, expert_ffn = 0, shared_ffn = 0;
  int first_dense = 0;
};

// Validated configuration plus the index arithmetic of the device mesh.
struct Layout {
  Layout(const ModelShape& model, const PlanConfig& config);  // throws std::invalid_argument
  // The same model with every degree 1 and no bug: the logical program.
  Layout single_device() const;

  ModelShape model;
  PlanConfig c;
  bool logical = false;
  int L, dp, tp, pp, cp, mb, zero;
  int vpp = 1;  // model chunks per pp rank (interleaved pipeline)
  bool sp, tie;
  int64_t B, S, H, NH, NKV, D, F, V;

  bool adam() const { return c.optimizer == "adam"; }
  bool bug(const char* name) const { return c.bug == name; }
  int world() const { return dp * cp * tp * pp; }
  // tp fastest, then cp, then dp, then pp (Megatron's order).
  int rank(int d, int cc, int t, int p) const { return ((p * dp + d) * cp + cc) * tp + t; }
  int64_t local_batch() const { return B / (int64_t(dp) * mb); }
  // Ranks of one tp group share a kv head when tp exceeds the kv heads.
  int kv_replicas() const { return tp > NKV ? int(tp / NKV) : 1; }
  int64_t local_heads() const { return NH / tp; }
  int64_t local_kv_heads() const { return tp > NKV ? 1 : NKV / tp; }
  // Pipeline: pp * vpp contiguous virtual stages (chunks), the first
  // L % (pp * vpp) one layer longer; virtual stage k runs on pp rank k % pp
  // (Megatron's interleaving; vpp = 1: one contiguous stage per rank).
  // stage_begin(k) is the first layer of virtual stage k (of rank k's first
  // chunk for k < pp).
  int stage_begin(int k) const;
  int stage_end(int k) const { return stage_begin(k + 1); }
  int chunk_of(int layer) const;
  int stage_of(int layer) const { return chunk_of(layer) % pp; }
  int last_stage() const { return pp - 1; }
  // The layer the catalogue's per-layer bugs corrupt: the middle one.
  int bug_layer() const { return (L - 1) / 2; }

  // --- MoE (moe_layout.cpp); E == 0 for dense models.
  int ep = 1;
  int64_t E = 0, C = 0, FE = 0, FS = 0;
  // Expert-data-parallel degree: the replicas of each expert block. The ep
  // groups are blocks of ep consecutive dp ranks (ep rank d % ep), the edp
  // groups the dp ranks with the same ep rank (Megatron's expert mesh).
  // With etp < tp (--etp) the expert mesh re-factors the tp x dp ranks
  // instead (Megatron: ep x etp x edp = tp x dp): rank (d, t) is etp rank
  // t % etp and expert-dp index q = d * (tp / etp) + t / etp, whose ep rank
  // is q % ep and edp rank q / ep (moe_etp.cpp); at etp == tp, q == d.
  int etp = 1;
  bool etp_split() const { return moe() && etp < tp; }
  // The ranks of a tp group sharing an etp rank: each takes one block of
  // its dp rank's sequences to the experts.
  int etp_splits() const { return tp / etp; }
  int edp() const { return dp * etp_splits() / ep; }
  // The compact form numbers these ranks over mesh axes (transformer_mesh.h).
  int first_dense = 0;
  bool moe() const { return E > 0; }
  bool moe_layer(int i) const { return E > 0 && i >= first_dense; }
  // The MoE layer the MoE bugs corrupt: the middle layer or, when that one
  // is dense, the first MoE layer (== L when there is none).
  int moe_bug_layer() const { return bug_layer() > first_dense ? bug_layer() : first_dense; }
  // Reads the MoE shape and checks ep, cp, sp against it (throws).
  void init_moe();
  void check_etp_split() const;  // etp < tp: what the expert mesh supports (throws)
};

struct BugSpec {
  BugInfo info;
  // Empty when the bug applies to the layout, else why not (e.g. "needs tp >= 2").
  std::string (*not_applicable)(const Layout&);
  std::string (*first_tensor)(const Layout&);
};
const std::vector<BugSpec>& bug_table();
// Throws std::invalid_argument (naming `family`) for an unknown or inapplicable bug.
const BugSpec* find_bug(const Layout& layout, const std::string& family);
// Bugs of the options (--bias, --reshard-residual) and of MoE layers, kept
// apart from the llama catalogue (transformer_options.cpp, moe_bugs.cpp).
const std::vector<BugSpec>& option_bug_table();
const std::vector<BugSpec>& moe_bug_table();
// The bugs of Megatron's expert mesh with etp < tp (moe_etp_bugs.cpp).
const std::vector<BugSpec>& moe_etp_bug_table();
// Training-step bugs: clipping, accumulation, wrong groups (step_bugs.cpp).
const std::vector<BugSpec>& step_bug_table();
// The logical tensor the global norm's dense sum of squares is (--clip).
std::string clip_total(const Layout& s);
// Every bug find_bug knows, and those a model family can carry.
std::vector<const BugSpec*> all_bugs();
std::vector<BugInfo> family_bugs(const ModelShape& model);
// Why a catalogue bug cannot fire in this (MoE) layout beyond its own
// condition, e.g. an MLP bug whose reference layer is an MoE layer; "" if it can.
std::string family_not_applicable(const Layout& layout, const std::string& bug);

// The pipeline schedule section of a plan with pp >= 2 (pipeline_schedule.cpp).
nlohmann::json pipeline_schedule(const Layout& s);
// Its interleaved form, with vpp chunks per rank (pipeline_schedule_interleaved.cpp).
nlohmann::json interleaved_schedule(const Layout& s);

// The plan document and the first tensor of its bug (transformer_plan.cpp).
nlohmann::json transformer_plan(const ModelShape& model, const PlanConfig& config);
std::string transformer_first_tensor(const ModelShape& model, const PlanConfig& config);

// How one dimension of a logical tensor is cut over the mesh.
enum class Ax {
  Full,      // not cut
  Batch,     // sequences of (micro-batch, dp rank), micro-batch major
  Seq,       // context-parallel chunk
  SeqSp,     // context-parallel chunk, then the tp rank's piece under sequence parallelism
  Tp,        // block t of tp (heads, ffn columns, vocabulary)
  Kv,        // the kv heads of tp rank t (replicated when tp exceeds the kv heads)
  TpGate,    // block t of the first half (gate columns of the fused gate/up weight)
  TpUp,      // block t of the second half (up columns)
  KvModulo,  // bug kv-heads-not-replicated: kv head t % kv_heads
  MbBatch,   // sequences of micro-batch m over x's ep group (what an expert owner gets)
  Expert,    // expert block of ep rank d % ep; every expert when ep == 1
  Etp,       // block of the expert ffn: t of tp, or (--etp) t % etp of etp
  EtpBatch,  // (etp < tp) x's token split t / etp of its Batch block
};
using Spec = std::vector<Ax>;

struct Part {
  Aff k = 0;
  int64_t n = 1;
};

// The graph a layout's builder writes into (transformer_graph.cpp).
std::unique_ptr<Graph> v1_graph(GraphBuilder& g, const Layout& s);
std::unique_ptr<Graph> compact_graph(CompactBuilder& g, const Layout& s);
// Empty when the compact form can be written for the layout, else the flag
// (or configuration) it does not support yet, and why.
std::string compact_unsupported(const Layout& s);

class Builder {
 public:
  Builder(const Layout& layout, Graph& graph) : s(layout), g(graph) {
    if (g.compact()) mesh_.emplace(s);
  }
  void build();

 private:
  // --- moe_step.cpp: the step run in lock step over dp ranks per
  // micro-batch, so an MoE layer's all_to_all sees every rank's tokens.
  void build_lockstep();
  // --- transformer_builder.cpp: names, claims, collectives, inputs
  std::string at(const Coord& x, const std::string& name) const;       // per micro-batch
  std::string at_rank(const Coord& x, const std::string& name) const;  // per rank
  int rank(const Coord& x) const { return s.rank(x.d, x.c, x.t, x.p); }
  // Writing the compact form: coordinates are the mesh axes.
  bool sym() const { return g.compact(); }
  // Every device (dp, cp, tp) of stage p, in rank order (compact: the one
  // symbolic device); every dp rank; every micro-batch.
  std::vector<Coord> devices(int p) const;
  std::vector<Ix> dp_ranks() const;
  std::vector<Ix> microbatches() const;
  // Which of the kv_replicas() ranks sharing a kv head x is.
  Aff kv_replica(const Coord& x) const;
  // Where the gradient contributions of a piece are kept: its rank (v1),
  // its stage (compact).
  int grad_key(const Coord& x) const { return sym() ? x.p : rank(x); }
  SymSlice slice_of(const Coord& x, const Shape& full, const Spec& spec) const;
  // The block of the batch (of dp * mb) that micro-batch x.m of dp rank x.d
  // holds (Ax::Batch).
  Aff batch_block(const Coord& x) const;
  // Declares local tensor `local` standing for logical[spec slice] (or part
  // of it); in the logical graph it is the logical tensor itself.
  std::string claim(const Coord& x, const std::string& local, const std::string& logical,
                    const Shape& full, const Spec& spec, Part part = {},
                    const std::string& dtype = "f32");
  // A micro-batch activation: local name at(x, logical).
  std::string act(const Coord& x, const std::string& logical, const Shape& full, const Spec& spec,
                  Part part = {}, const std::string& dtype = "f32");
  // A tensor with no logical counterpart (a partial, a mask).
  std::string scratch(const Coord& x, const std::string& name, const Shape& shape,
                      const std::string& dtype = "f32");
  void op(const Coord& x, const std::string& name, const std::string& op,
          std::vector<std::string> in, std::vector<std::string> out,
          nlohmann::json attrs = nlohmann::json::object());
  std::string constant(const Coord& x, const std::string& name, const Shape& shape,
                       nlohmann::json value, const std::string& dtype);
  Group tp_group(const Coord& x) const;
  // x's rank alone (a collective that each member runs by itself).
  Group solo_group(const Coord& x) const;
  Group cp_group(const Coord& x) const;
  Group dp_cp_group(const Coord& x) const;
  // The devices of x's dp x cp group (v1), in group order, from dp and cp 0.
  std::vector<Coord> dp_cp_members(const Coord& x) const;
  void collective(const std::string& name, const std::string& op, std::vector<std::string> in,
                  std::vector<std::string> out, const Group& group,
                  nlohmann::json attrs = nlohmann::json::object());
  // Runs `local(x)` for every tp rank of x's group.
  void each_tp(Coord x, const std::function<void(const Coord&)>& local);
  // Where x's tp rank is in the lists each_tp fills (the compact form has one).
  size_t tp_index(const Coord& x) const { return sym() ? 0 : size_t(int(x.t)); }
  void each_cp(Coord x, const std::function<void(const Coord&)>& local);
  void each_cp_tp(Coord x, const std::function<void(const Coord&)>& local);
  // Runs `local(x)` for every dp rank (the MoE lockstep).
  void each_dp(Coord x, const std::function<void(const Coord&)>& local);
  // The first dp rank of every ep group (compact: one symbolic leader), and
  // `local(x)` for every member of the ep group x leads.
  std::vector<Ix> ep_leaders() const;
  void each_ep(Coord x, const std::function<void(const Coord&)>& local);
  Group ep_group(const Coord& x) const;
  // The dp rank in the compact form: the dp axis, or on the expert mesh
  // dp*ep + ep. A dp rank's ep rank (d % ep) and its place in its edp
  // group (d / ep), affine in the mesh axes there.
  Ix dp_coord() const;
  Aff ep_rank(const Coord& x) const;
  Aff edp_rank(const Coord& x) const;
  // The size of a mesh axis of the compact form.
  int axis_size(const std::string& axis) const;
  // The compact form's mesh (transformer_mesh.h); an internal error in v1.
  const CompactMesh& mesh() const;

  // A sum over the tp group: `produce(x, out)` writes part t of tp of logical
  // `name` (full shape `full`, cut as `spec` with `seq_dim` being Seq) into
  // `out`; the parts are all-reduced (spec kept) or, under sequence
  // parallelism with seq_dim >= 0, reduce-scattered along seq_dim (SeqSp).
  // `site` names the call for bug injection.
  void tp_sum(Coord x, const std::string& name, const Shape& full, Spec spec, int seq_dim,
              const std::string& site,
              const std::function<void(const Coord&, const std::string&)>& produce);
  // Under sequence parallelism: all-gathers the SeqSp tensor at(x, name)
  // along seq_dim over the tp group; returns the local name holding the
  // gathered (Seq) tensor on x.t. Otherwise returns at(x, name).
  std::string gather_seq(const Coord& x, const std::string& name, const Shape& full, Spec spec,
                         int seq_dim);
  void all_gather_seq_group(Coord x, const std::string& name, const Shape& full, Spec spec,
                            int seq_dim);

  // --- transformer_bugs.cpp: where the catalogue's bugs hook in.
  // Where a bug fires: nowhere, everywhere (always so in v1, where the
  // coordinates are known), or (compact) on the coordinates `at` lists.
  struct BugSite {
    bool fires = false;
    Site at = {};
  };
  // The coordinates of x where d and c are 0, m is `m` and (t0) t is 0.
  BugSite site_at(const Coord& x, int m = 0, bool t0 = false) const;
  // Writes emit(true) where the bug fires and emit(false) elsewhere (in the
  // compact form: once per disjoint condition).
  void branch(const BugSite& site, const std::function<void(bool buggy)>& emit);
  // How the tp reduction at `site` is corrupted at x: "" (not), "skip",
  // "mean" or "double", and where.
  std::pair<std::string, BugSite> tp_sum_bug(const std::string& site, const Coord& x) const;
  // How the sequence-parallel all-gather of `name` is corrupted: "", "order",
  // "dim", and where.
  std::pair<std::string, BugSite> gather_bug(const std::string& name, const Coord& x) const;
  struct Param;
  // "skip" or "mean" for the dp gradient sync of piece p at x (its first
  // member), else "", and where.
  std::pair<std::string, BugSite> dp_sync_bug(const Param& p, const Coord& x) const;
  BugSite send_bug(const std::string& name, const Coord& from) const;
  std::string send_bug_source(const std::string& name, const Coord& from) const;
  // The token count the loss is normalised by (B*S unless a bug says otherwise).
  int64_t loss_token_count(const Coord& x) const;
  // True when the bug named `bug` fires at layer `i` for coordinates x (its
  // chosen site: dp0, cp0, mb0 and the reference layer).
  bool fires(const char* bug, int i, const Coord& x) const;

  // --- transformer_inputs.cpp: parameters, data, tables
  struct Param {
    std::string logical;  // e.g. l0.wq
    std::string loaded;   // what the rank's input claims (== logical unless a bug swaps it)
    Shape full;
    Spec spec;          // how a rank holds it
    std::string local;  // local suffix (the piece), usually == logical
    int stage;
  };
  void declare_params();
  void add_param(const std::string& logical, const Shape& full, const Spec& spec, int stage,
                 const std::string& local = "");
  void add_input(const std::string& name);
  void add_output(const std::string& name);
  const Param& param(const std::string& local) const;
  std::string weight(const Coord& x, const std::string& local) const { return at_rank(x, local); }
  void inputs();
  // ZeRO-3: whether p is held as dim-0 shards, and the all-gather of its
  // shards into the whole piece (transformer_inputs.cpp).
  bool zero3_sharded(const Param& p) const;
  void gather_param(const Param& p);
  void gather_param_compact(const Param& p);
  // Whether layer i multiplies by the fused gate/up weight (see transformer_mlp.cpp).
  bool fused_gate_up(int layer) const;
  std::string fused_weight(const Coord& x, int layer) const;

  // --- transformer_layer.cpp: forward and backward of one decoder layer
  std::string rmsnorm_forward(const Coord& x, const std::string& prefix, const std::string& in,
                              const std::string& w_local, const Shape& full, const Spec& spec);
  // Writes d(in) into the local tensor of logical `out_logical`.
  std::string rmsnorm_backward(const Coord& x, const std::string& prefix, const std::string& in,
                               const std::string& w_local, const std::string& dy,
                               const std::string& out_logical, const Shape& full, const Spec& spec);
  std::string rope(const Coord& x, const std::string& in, const std::string& out_logical,
                   bool backward, const Shape& full, const Spec& spec, Part part = {});
  void attention_forward(int i, Coord x);
  void mlp_forward(int i, Coord x);
  void mlp_backward(int i, Coord x);
  // transformer_dropout.cpp: --dropout on layer i's MLP output (returns the
  // tensor the residual adds: the dropped output, or the output itself).
  std::string dropout(const Coord& x, int i);
  std::string rng_state(const Coord& x);
  void attention_backward(int i, Coord x);

  // --- transformer_options.cpp: --bias and --reshard-residual.
  // The attention output projection's partial on x (plus, on tp rank 0, the
  // bias) into `out`.
  void output_projection(const Coord& x, int i, const std::string& out);
  void bias_backward(int i, Coord x0);
  // The tensor a layer's residual add writes for resid(i) on x, and the
  // scatter/all-gather round trip that then gives resid(i) (no-op without
  // --reshard-residual).
  std::string resid_out(const Coord& x, int i);
  void reshard_resid(Coord x0, int i);
  bool resharding() const { return !s.logical && s.c.reshard_residual; }

  // --- moe_forward.cpp / moe_backward.cpp: one MoE layer for micro-batch
  // x0.m on every dp and tp rank of its stage.
  void declare_moe_params(int i);
  void moe_inputs();
  void moe_forward(int i, Coord x0);
  void moe_backward(int i, Coord x0);
  // Spec of [B, E, C, *] tensors on the expert side (at the owner).
  Spec expert_spec(Ax last) const;
  // all_to_all of at(x, name) over each ep group: `to_experts` sends token
  // slots to their expert's owner (claims `name` with expert_spec),
  // otherwise back to the tokens' rank (claims the Batch slice). Writes
  // at(x, name) + suffix. No-op (suffix-less names) when ep == 1.
  std::string expert_side(const Coord& x, const std::string& name) const;
  std::string token_side(const Coord& x, const std::string& name) const;
  void moe_all_to_all(Coord x0, const std::string& name, bool to_experts);
  void all_to_all_group(const Coord& xg, const std::string& name, bool to_experts);
  // Per-expert weight gradient: a [B, E, C, k] and b [B, E, C, n] on the
  // expert side -> [E, k, n] summed over sequences and slots.
  void expert_weight_grad(const Coord& x, const std::string& a, const std::string& b,
                          const std::string& piece);
  // moe_etp.cpp: the expert mesh with etp < tp. x's expert-dp index q and
  // the device of expert-dp index q with x's etp rank.
  int expert_dp(const Coord& x) const;
  Coord expert_coord(Coord x, int q) const;
  // x's etp rank (t % etp) and token split (t / etp), affine in the compact form.
  Aff etp_rank(const Coord& x) const;
  Aff token_split(const Coord& x) const;
  // The tokens at(x, name) of the rank's token split (Ax::EtpBatch), what
  // it sends to the experts (at(x, name) unless etp < tp).
  std::string split_side(const Coord& x, const std::string& name) const;
  void split_tokens(Coord x0, int i, const std::string& name);
  // What comes back from the experts (the split) all-gathered over the
  // token splits of the tp group into token_side (no-op unless etp < tp).
  std::string returned_side(const Coord& x, const std::string& name) const;
  void gather_splits(Coord x0, const std::string& name);
  // A sum of expert ffn partials: over tp (tp_sum), or over the etp group
  // of each token split (etp < tp; nothing to sum at etp 1).
  void expert_sum(Coord x0, const std::string& name,
                  const std::function<void(const Coord&, const std::string&)>& produce);
  void expert_sum_compact(Coord x0, const std::string& name,
                          const std::function<void(const Coord&, const std::string&)>& produce);
  std::vector<Coord> etp_members(const Coord& x) const;
  // --clip: the ranks whose expert pieces x's expert sum of squares joins.
  std::vector<int> etp_norm_group(const Coord& x) const;
  // moe_seq.cpp: sequence and context parallelism around an MoE layer.
  // All-gathers the tokens `name` (cut as the residual) of dp rank x0.d into
  // whole sequences on every tp and cp rank (no-op without sp or cp).
  void gather_moe_tokens(Coord x0, const std::string& name);
  std::string moe_tokens(const Coord& x, const std::string& name);
  // x's own piece (as the residual is cut) of whole-sequence `name`.
  std::string own_tokens(const Coord& x, int i, const std::string& name);
  // The token slots xin2 = disp2^T @ n of layer i (or a bug's).
  void dispatch_tokens(const Coord& x, int i, const std::string& disp2, const std::string& n,
                       const std::string& xin2);
  // Under cp: x's block (of cp) of t along dim, for weight gradients.
  std::string cp_own_rows(const Coord& x, const std::string& t, int dim, const std::string& name);
  // each_dp then each_cp.
  void each_dp_cp(Coord x, const std::function<void(const Coord&)>& local);
  // moe_bugs.cpp hooks.
  std::pair<std::string, BugSite> moe_tp_sum_bug(const std::string& site, const Coord& x) const;
  std::pair<std::string, BugSite> moe_dp_sync_bug(const Param& p, const Coord& x) const;
  // moe_fires as a site (compact: the coordinates where it fires).
  BugSite moe_site(const char* bug, int i, const Coord& x) const;
  bool moe_fires(const char* bug, int i, const Coord& x) const;
  // False for a parameter piece that has no dp replicas (an expert block under ep).
  bool dp_replicated(const Param& p) const;
  // An expert block under 1 < ep < dp (or ep > 1 under cp): replicated over
  // its edp (x cp) group only.
  bool edp_replicated(const Param& p) const;
  // An expert block ZeRO shards over its edp group (Megatron's distributed
  // optimizer); under cp such blocks stay whole (moe_layout.cpp refuses ZeRO
  // where they would need sharding over edp x cp).
  bool zero_over_edp(const Param& p) const { return edp_replicated(p) && s.cp == 1; }
  // Whether p's gradient is summed over the edp (x cp) group: an expert
  // block replicated there, or the shared expert under its bug.
  bool synced_over_edp(const Param& p) const;
  // Compact form: that group (its edp axes, and cp).
  Group edp_group() const;
  // The members of the gradient sync of p that x leads (its dp x cp group,
  // its edp group, or what a bug makes of it), empty when x leads none.
  std::vector<Coord> sync_members(const Param& p, const Coord& x) const;
  // Keeps K or V of every head group to `heads` (expanded GQA) and back.
  std::string expand_kv(const Coord& x, const std::string& kv_t, const std::string& out_logical,
                        int64_t seq_len);
  std::string reduce_kv(const Coord& x, const std::string& g_exp, const std::string& name,
                        int64_t seq_len);

  // --- transformer_head.cpp: embedding, LM head and loss
  void embedding_forward(Coord x);
  void embedding_backward(Coord x);
  void head_forward_backward(Coord x);
  std::string onehot(const Coord& x, const std::string& name, const std::string& ids3,
                     const Shape& full);
  // Vocabulary-parallel masking of integer ids: (local ids, owned mask as f32).
  std::pair<std::string, std::string> owned_ids(const Coord& x, const std::string& prefix,
                                                const std::string& ids);
  void send(const Coord& from, const Coord& to, const std::string& name, const Shape& full,
            const Spec& spec);

  // --- transformer_update.cpp: gradient accumulation, sync, optimizer
  // Declares (and records) the local tensor that receives one contribution
  // (`what`: which one) to the gradient of parameter piece `local` on x's
  // rank; `shape` is the piece's local shape.
  // `index` is the extent of the local contraction that computes it (the
  // micro-batch's tokens, or its [batch, seq] for a sum over both): where
  // the layout allows, the contribution claims its partial sum over them
  // (lineage "over", partial_box).
  std::string grad_target(const Coord& x, const std::string& local, const std::string& what,
                          const Shape& shape, const Shape& index);
  // The index set of x's micro-batch (or, `whole_rank`, of all x's rank's
  // micro-batches) in the logical contraction that computes the gradient of
  // piece `local`, when its contributions can claim partial sums: the
  // tokens are not split by cp or sp, and the piece's gradient is one
  // contraction (not the tied table's two, not kv heads split over
  // replicas). A rank's rows are one block, or under MoE (micro-batch major
  // rows) one block per micro-batch, dp blocks apart.
  std::optional<std::vector<SymClaim::Over>> partial_box(const Coord& x, const std::string& local,
                                                         bool whole_rank) const;
  // Declares `local`, holding x's micro-batch's contribution to `p` (or,
  // `whole_rank`, the sum of x's rank's), claimed as that partial sum when
  // partial_box allows, unclaimed otherwise.
  void declare_partial(const Coord& x, const Param& p, const std::string& local, const Shape& shape,
                       bool whole_rank);
  std::map<std::pair<int, std::string>, Shape> grad_index_;  // grad_key, piece -> index
  void update_params();
  void update_piece(const std::vector<const Param*>& pieces);
  // transformer_update_compact.cpp: the same in the compact form, where the
  // accumulation over micro-batches is one chain of templates.
  void update_piece_compact(const Param& p);
  // ZeRO: the shard of piece p that x's rank steps (zero_ways shards of dim 0).
  SymSlice zero_slice(const Param& p, const Coord& x) const;
  // ZeRO's shards of piece p: dp * cp, or edp for an expert block replicated
  // over its edp group (Megatron's distributed optimizer shards expert
  // parameters over the expert-data-parallel group); x's rank holds shard
  // zero_index, the members (leader first, in shard order) hold them all.
  int zero_ways(const Param& p) const;
  Aff zero_index(const Param& p, const Coord& x) const;
  std::vector<Coord> zero_members(const Param& p, const Coord& x) const;
  // A tensor standing for logical[slice] (part k of n) on x's rank.
  void declare(const Coord& x, const std::string& local, const std::string& logical,
               const SymSlice& slice, Part part = {});
  // `shard`: ZeRO-2/3 reduce-scatters (otherwise an all-reduce).
  void dp_sync(const Param& p, const Coord& x, const std::vector<std::string>& in,
               const std::vector<std::string>& out, const Group& group, bool shard);
  void step(const Param& p, const Coord& x, const std::string& g_piece, bool zero);
  // The optimizer steps update_piece leaves for after every piece's sync, so
  // that gradient clipping sees every gradient first.
  struct PendingStep {
    const Param* p;
    Coord x;
    std::string g;  // the synced gradient (its shard under ZeRO)
    bool zero;
    bool tied_copy;  // the tied table's copy on the last stage
  };
  std::vector<PendingStep> pending_;
  // The accumulated gradient before any sync, per (piece, rank).
  std::map<std::pair<std::string, int>, std::string> presync_;
  // step_bugs.cpp hooks: one link of the accumulation chain (acc + term ->
  // next, or what a bug makes of it); the contributions as a bug rewrites
  // them before they are accumulated (a micro-batch's all-reduced over dp,
  // an expert's scaled by 1/dp); the dp sync of a piece run on the tp group.
  void accumulate(const Param& p, const Coord& x, size_t k, const std::string& acc,
                  const std::string& term, const std::string& next);
  void rewrite_terms(const Param& p);
  bool dp_sync_on_tp_group(const Param& p) const;
  // The extra dp all-reduce of bug zero3-grad-double-reduced (x leads the
  // group): its outputs, which the regular sync then reduces again.
  std::vector<std::string> reduce_twice(const Param& p, const Coord& x,
                                        const std::vector<std::string>& in, const Group& group);
  // The members of the sequence-parallel gradient sum of p that x leads (its
  // tp group, or what a bug makes of it), empty when x leads none.
  std::vector<Coord> sp_sync_members(const Param& p, const Coord& x) const;
  // ZeRO-1: which shard of the summed gradient x's rank keeps.
  int64_t zero_partition(const Param& p, const Coord& x) const;
  // The dp rank of the last stage whose tied table x's first-stage one is summed with.
  Ix tied_partner_dp(const Coord& x) const;
  // transformer_clip.cpp: --clip, then every pending step.
  void finish_updates();
  void clip_gradients();
  void clip_gradients_compact();
  // The compact form's norm group: the mesh axes norm_group's members span.
  std::vector<std::string> norm_axes(bool expert) const;
  // Which ranks holding a piece count it in the norm: none, all, tp rank 0
  // (a piece replicated over tp), the first rank of each kv head's replicas.
  enum class NormShare { None, All, FirstTp, FirstKvReplica };
  NormShare norm_share(const PendingStep& u) const;
  bool norm_counts(const PendingStep& u) const;
  // The piece's square and its sum (claimed over the piece's box).
  std::string piece_sum_of_squares(const PendingStep& u);
  // sqrt, 1 / (norm + eps), min with 1 on x's rank; returns the coefficient.
  std::string clip_coefficient(const Coord& x, const std::string& ss);
  // Every pending piece's gradient times its rank's coefficient.
  void clip_pieces();
  std::vector<int> norm_group(const Coord& x, bool expert) const;
  std::string norm_tensor(const Coord& x, const std::string& local, const std::string& logical,
                          const SymSlice& slice, std::vector<SymClaim::Over> over = {});
  std::string sum_terms(const Coord& x, const std::string& name,
                        const std::vector<std::string>& terms, const std::string& out);
  void finish_step(const Param& p, const Coord& x, const std::string& next, bool zero);
  nlohmann::json optimizer_attrs() const;

  const Layout& s;
  Graph& g;
  std::optional<CompactMesh> mesh_;
  std::vector<Param> params_;
  // (rank, piece) -> contributions, in emission order.
  std::map<std::pair<int, std::string>, std::vector<std::string>> grads_;
  // The same contributions as suffixes: at(x, suffix) at any micro-batch.
  std::map<std::pair<int, std::string>, std::vector<std::string>> grad_whats_;
  std::vector<std::string> declared_inputs_, declared_outputs_;
  // ZeRO: updated shards per (piece, stage, tp rank, group leader's dp rank),
  // in zero_members order.
  std::map<std::tuple<std::string, int, int, int>, std::vector<std::string>> zero_shards_;
};

// Reverses a gather's members (a bug): each input and output stays on its rank.
void reverse_members(std::vector<std::string>& in, std::vector<std::string>& out, Group& group);

std::string layer(int i);  // "l{i}"
std::string resid(int i);  // "x{i}": the residual stream entering layer i
inline std::string grad(const std::string& t) {
  return "grad." + t;
}

}  // namespace shardproof::planner::transformer
