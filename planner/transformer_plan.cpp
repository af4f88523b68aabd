// The plan document of a transformer family (llama3-*, MoE): both graphs
// written by the one builder, the meta block and the plan's name.
#include <stdexcept>

#include "planner/compact_builder.h"
#include "planner/stage_fold.h"
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

Layout layout(const ModelShape& model, const PlanConfig& config) {
  PlanConfig c = config;
  // Default batch: enough sequences for every dp rank and micro-batch (and,
  // with --etp below tp, for each token split of a tp group: moe_etp.cpp).
  const int splits = c.etp > 0 && c.etp < c.tp && c.tp % c.etp == 0 ? c.tp / c.etp : 1;
  if (c.batch == 0) c.batch = c.dp * c.microbatches * splits;
  return Layout(model, c);
}

std::string plan_name(const Layout& s) {
  auto n = [](auto v) { return std::to_string(v); };
  std::string name = s.model.name + " L" + n(s.L) + " b" + n(s.B) + " s" + n(s.S) + " dp" +
                     n(s.dp) + " tp" + n(s.tp) + " pp" + n(s.pp);
  if (s.vpp > 1) name += " vpp" + n(s.vpp);
  if (s.ep > 1) name += " ep" + n(s.ep);
  if (s.etp_split()) name += " etp" + n(s.etp);
  if (s.cp > 1) name += " cp" + n(s.cp);
  if (s.sp) name += " sp";
  if (s.zero) name += " zero" + n(s.zero);
  if (s.tie) name += " tied";
  if (s.c.bias) name += " bias";
  if (s.c.reshard_residual) name += " reshard";
  if (s.c.clip) name += " clip";
  if (s.c.dropout) name += " dropout";
  if (s.c.schedule) name += s.vpp > 1 ? " interleaved-1f1b" : " 1f1b";
  name += " mb" + n(s.mb) + " " + s.c.optimizer;
  if (!s.c.bug.empty()) name += ", bug " + s.c.bug;
  return name;
}

nlohmann::json meta(const Layout& s) {
  nlohmann::json meta = {{"model", s.model.name},
                         {"layers", s.L},
                         {"hidden", s.H},
                         {"heads", s.NH},
                         {"kv_heads", s.NKV},
                         {"ffn", s.F},
                         {"vocab", s.V},
                         {"seq", s.S},
                         {"batch", s.B},
                         {"dp", s.dp},
                         {"tp", s.tp},
                         {"pp", s.pp},
                         {"cp", s.cp},
                         {"sp", s.sp},
                         {"zero", s.zero},
                         {"tie_embeddings", s.tie},
                         {"microbatches", s.mb},
                         {"optimizer", s.c.optimizer}};
  if (s.c.bias) meta["bias"] = true;
  if (s.c.reshard_residual) meta["reshard_residual"] = true;
  if (s.c.clip) meta["clip"] = true;
  if (s.c.dropout) meta["dropout"] = true;
  if (s.vpp > 1) meta["vpp"] = s.vpp;
  if (s.moe()) {
    meta["ep"] = s.ep;
    if (s.etp_split()) meta["etp"] = s.etp;
    meta["experts"] = s.E;
    meta["capacity"] = s.C;
    meta["expert_ffn"] = s.FE;
    meta["shared_ffn"] = s.FS;
    meta["first_dense"] = s.first_dense;
  }
  return meta;
}

}  // namespace

nlohmann::json transformer_plan(const ModelShape& model, const PlanConfig& config) {
  Layout s = layout(model, config);
  const BugSpec* bug = find_bug(s, model.name);
  GraphBuilder logical;
  Layout one = s.single_device();
  Builder(one, *v1_graph(logical, one)).build();
  nlohmann::json parallel_json;
  if (config.compact) {
    if (std::string why = compact_unsupported(s); !why.empty())
      throw std::invalid_argument(model.name + ": --compact does not support " + why + " yet");
    // Rank order: tp fastest, then cp, dp, pp (Layout::rank); the expert
    // mesh's axes number the dp and tp ranks so that the ranks keep their
    // numbers (transformer_mesh.h).
    CompactBuilder parallel(CompactMesh(s).axes(), s.mb);
    Builder(s, *compact_graph(parallel, s)).build();
    parallel_json = parallel.to_json();
    if (config.fold_stages) parallel_json = fold_pipeline_stages(std::move(parallel_json));
  } else {
    GraphBuilder parallel(&logical, s.world());
    Builder(s, *v1_graph(parallel, s)).build();
    parallel_json = parallel.to_json();
  }
  nlohmann::json m = meta(s);
  if (bug) {
    m["bug"] = bug->info.name;
    m["bug_first_tensor"] = bug->first_tensor(s);
  }
  nlohmann::json plan = {{"format", config.compact ? "shardproof-plan/1.1" : "shardproof-plan/1"},
                         {"name", plan_name(s)},
                         {"meta", std::move(m)},
                         {"logical", logical.to_json()},
                         {"parallel", std::move(parallel_json)}};
  if (s.c.schedule) plan["schedule"] = pipeline_schedule(s);
  return plan;
}

std::string transformer_first_tensor(const ModelShape& model, const PlanConfig& config) {
  Layout s = layout(model, config);
  const BugSpec* bug = find_bug(s, model.name);
  if (!bug) throw std::invalid_argument(model.name + ": no bug in this config");
  return bug->first_tensor(s);
}

}  // namespace shardproof::planner::transformer
