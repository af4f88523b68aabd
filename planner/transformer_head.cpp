// Embedding (vocabulary-parallel under tp: each rank looks up the ids it
// owns, the others are masked, the parts summed), the LM head with a
// vocabulary-parallel cross-entropy (global max and sum of exponentials by
// all-reduce, the label's log-probability picked on the rank that owns it),
// their backward passes, and pipeline sends.
#include "planner/transformer.h"

namespace shardproof::planner::transformer {

namespace {

const Spec kResid = {Ax::Batch, Ax::SeqSp, Ax::Full};
const Spec kVocab = {Ax::Batch, Ax::Seq, Ax::Tp};
const Spec kRow = {Ax::Batch, Ax::Seq, Ax::Full};

}  // namespace

void Builder::send(const Coord& from, const Coord& to, const std::string& name, const Shape& full,
                   const Spec& spec) {
  std::string dst = act(to, name, full, spec);
  branch(send_bug(name, from), [&](bool buggy) {
    const std::string src = buggy ? send_bug_source(name, from) : at(from, name);
    g.send(at(from, name + ".send"), from, to, src, dst);
  });
}

// Masks ids outside [lo, hi) of this rank's vocabulary block: returns the
// local ids (0 where not owned) and the owned mask as f32 [.., 1]-shaped
// like `ids`.
std::pair<std::string, std::string> Builder::owned_ids(const Coord& x, const std::string& prefix,
                                                       const std::string& ids) {
  const Shape shape = g.shape(ids);
  const Aff lo = Aff(x.t) * (s.V / s.tp);
  const Aff hi = lo + s.V / s.tp;
  std::string lo_c = constant(x, prefix + ".lo", shape, lo.attr(), "i64");
  const bool off = prefix == "emb.ids" && s.bug("vocab-range-off-by-one");
  std::string hi_c;
  branch(off ? site_at(x, 0, true) : BugSite{}, [&](bool buggy) {
    hi_c = constant(x, prefix + ".hi", shape, (buggy ? hi - 1 : hi).attr(), "i64");
  });
  std::string zero = constant(x, prefix + ".zero", shape, 0, "i64");
  std::string ge = scratch(x, prefix + ".ge", shape, "bool");
  op(x, prefix + ".ge", "ge", {ids, lo_c}, {ge});
  std::string lt = scratch(x, prefix + ".lt", shape, "bool");
  op(x, prefix + ".lt", "lt", {ids, hi_c}, {lt});
  std::string own = scratch(x, prefix + ".own", shape, "bool");
  op(x, prefix + ".own", "where", {ge, lt, ge}, {own});  // ge && lt
  std::string local = scratch(x, prefix + ".local", shape, "i64");
  op(x, prefix + ".local", "sub", {ids, lo_c}, {local});
  std::string safe = scratch(x, prefix + ".safe", shape, "i64");
  op(x, prefix + ".safe", "where", {own, local, zero}, {safe});
  std::string ownf = scratch(x, prefix + ".ownf", shape);
  op(x, prefix + ".ownf", "cast", {own}, {ownf}, {{"dtype", "f32"}});
  return {safe, ownf};
}

// one-hot over this rank's vocabulary block of the integer ids3 [b, s, 1].
std::string Builder::onehot(const Coord& x, const std::string& name, const std::string& ids3,
                            const Shape& full) {
  Shape local = g.shape(ids3);
  local.back() = s.logical ? s.V : s.V / s.tp;
  std::string pos = scratch(x, name + ".iota", local, "i64");
  op(x, name + ".iota", "iota", {}, {pos}, {{"shape", local}, {"dim", 2}});
  if (!s.logical && s.tp > 1) {
    std::string lo = constant(x, name + ".lo", {}, (Aff(x.t) * (s.V / s.tp)).attr(), "i64");
    std::string shifted = scratch(x, name + ".pos", local, "i64");
    op(x, name + ".pos", "add", {pos, lo}, {shifted});
    pos = shifted;
  }
  std::string eq = scratch(x, name + ".eq", local, "bool");
  op(x, name + ".eq", "eq", {pos, ids3}, {eq});
  std::string out = act(x, name, full, kVocab);
  op(x, name, "cast", {eq}, {out}, {{"dtype", "f32"}});
  return out;
}

void Builder::embedding_forward(Coord x0) {
  const Shape hs = {s.B, s.S, s.H};
  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, resid(0), hs, kRow, 1, "embedding", [&](const Coord& x, const std::string& out) {
      const std::string ids = at(x, "tokens");
      if (s.tp == 1) {
        op(x, "embedding", "embedding", {ids, weight(x, "emb")}, {out});
        return;
      }
      auto [safe, ownf] = owned_ids(x, "emb.ids", ids);
      std::string rows = scratch(x, "emb.rows", g.shape(out));
      op(x, "emb.lookup", "embedding", {safe, weight(x, "emb")}, {rows});
      Shape col = g.shape(ids);
      col.push_back(1);
      std::string own3 = scratch(x, "emb.own3", col);
      op(x, "emb.own3", "reshape", {ownf}, {own3}, {{"shape", col}});
      op(x, "emb.mask", "mul", {rows, own3}, {out});
    });
  });
}

void Builder::embedding_backward(Coord x0) {
  const Shape hs = {s.B, s.S, s.H};
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, grad(resid(0)), hs, kResid, 1); });
  each_cp_tp(x0, [&](const Coord& x) {
    const std::string gx = gather_seq(x, grad(resid(0)), hs, kResid, 1);
    const std::string ids = at(x, "tokens");
    Shape col = g.shape(ids);
    col.push_back(1);
    std::string ids3 = scratch(x, "emb.ids3", col, "i64");
    op(x, "emb.ids3", "reshape", {ids}, {ids3}, {{"shape", col}});
    std::string oh = onehot(x, "emb.onehot", ids3, {s.B, s.S, s.V});
    const int64_t tokens = col[0] * col[1];
    std::string oh2 = scratch(x, "emb.onehot.2d", {tokens, g.shape(oh)[2]});
    op(x, "emb.onehot.2d", "reshape", {oh}, {oh2}, {{"shape", g.shape(oh2)}});
    std::string gx2 = scratch(x, grad(resid(0)) + ".2d", {tokens, s.H});
    op(x, grad(resid(0)) + ".2d", "reshape", {gx}, {gx2}, {{"shape", g.shape(gx2)}});
    std::string ge = grad_target(x, "emb", "lookup", g.shape(weight(x, "emb")), {tokens});
    op(x, grad("emb") + ".lookup", "matmul", {oh2, gx2}, {ge}, {{"transpose_a", true}});
  });
}

void Builder::head_forward_backward(Coord x0) {
  const Shape hs = {s.B, s.S, s.H}, logits_full = {s.B, s.S, s.V}, row = {s.B, s.S, 1};
  const int L = s.L;
  each_cp_tp(x0, [&](const Coord& x) {
    rmsnorm_forward(x, "final", at(x, resid(L)), weight(x, "final.w"), hs, kResid);
  });
  each_cp(x0, [&](const Coord& xc) { all_gather_seq_group(xc, "final.out", hs, kResid, 1); });

  const bool split = !s.logical && s.tp > 1;
  // Local max and sum of exponentials, all-reduced over the vocabulary shards.
  auto vocab_reduce = [&](const std::string& name, const char* reduce,
                          const std::function<void(const Coord&, const std::string&)>& local) {
    each_cp_tp(x0, [&](const Coord& x) {
      Shape local_row = g.shape(at(x, "logits"));
      local_row.back() = 1;
      local(x, split ? scratch(x, name + ".local", local_row) : act(x, name, row, kRow));
    });
    if (!split) return;
    each_cp(x0, [&](const Coord& xc) {
      std::vector<std::string> in, out;
      each_tp(xc, [&](const Coord& x) {
        in.push_back(at(x, name + ".local"));
        out.push_back(act(x, name, row, kRow));
      });
      const bool solo = (name == "ce.max" && s.bug("ce-max-not-reduced")) ||
                        (name == "ce.sumexp" && s.bug("ce-sumexp-not-reduced"));
      branch(solo ? site_at(xc) : BugSite{}, [&](bool buggy) {
        if (!buggy) {
          collective(at(xc, name + ".tp_all_reduce"), "all_reduce", in, out, tp_group(xc),
                     {{"reduce", reduce}});
          return;
        }
        // Each rank keeps its own shard's max (or sum of exponentials).
        each_tp(xc, [&](const Coord& x) {
          const size_t k = tp_index(x);
          collective(at(xc, name + ".tp_all_reduce.solo" + x.t.text()), "all_reduce", {in[k]},
                     {out[k]}, solo_group(x), {{"reduce", reduce}});
        });
      });
    });
  };

  each_cp_tp(x0, [&](const Coord& x) {
    const std::string nf = gather_seq(x, "final.out", hs, kResid, 1);
    std::string logits = act(x, "logits", logits_full, kVocab);
    if (s.tie)
      op(x, "lm_head", "matmul", {nf, weight(x, "emb")}, {logits}, {{"transpose_b", true}});
    else
      op(x, "lm_head", "matmul", {nf, weight(x, "lm")}, {logits});
  });
  vocab_reduce("ce.max", "max", [&](const Coord& x, const std::string& out) {
    op(x, "ce.max", "max", {at(x, "logits")}, {out}, {{"dims", {-1}}, {"keepdim", true}});
  });
  vocab_reduce("ce.sumexp", "sum", [&](const Coord& x, const std::string& out) {
    std::string z = act(x, "ce.z", logits_full, kVocab);
    op(x, "ce.z", "sub", {at(x, "logits"), at(x, "ce.max")}, {z});
    std::string e = act(x, "ce.exp", logits_full, kVocab);
    op(x, "ce.exp", "exp", {z}, {e});
    op(x, "ce.sumexp", "sum", {e}, {out}, {{"dims", {-1}}, {"keepdim", true}});
  });
  each_cp_tp(x0, [&](const Coord& x) {
    std::string lse = act(x, "ce.lse", row, kRow);
    op(x, "ce.lse", "log", {at(x, "ce.sumexp")}, {lse});
    std::string lsm = act(x, "ce.lsm", logits_full, kVocab);
    op(x, "ce.lsm", "sub", {at(x, "ce.z"), lse}, {lsm});
  });
  // The label's log-probability, on the rank that owns the label.
  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, "ce.picked", row, kRow, -1, "ce.picked",
           [&](const Coord& x, const std::string& out) {
             const std::string labels = at(x, "labels");
             if (s.tp == 1) {
               op(x, "ce.pick", "gather", {at(x, "ce.lsm"), labels}, {out}, {{"dim", 2}});
               return;
             }
             auto [safe, ownf] = owned_ids(x, "ce.labels", labels);
             std::string raw = scratch(x, "ce.pick.raw", g.shape(out));
             op(x, "ce.pick", "gather", {at(x, "ce.lsm"), safe}, {raw}, {{"dim", 2}});
             op(x, "ce.pick.mask", "mul", {raw, ownf}, {out});
           });
  });

  // loss = -sum(picked) / (B*S): each (dp rank, micro-batch, cp rank) adds
  // its tokens' share.
  each_cp_tp(x0, [&](const Coord& x) {
    const int64_t count = loss_token_count(x);
    const Part part{(Aff(x.d) * s.mb + x.m) * s.cp + x.c, int64_t(s.dp) * s.mb * s.cp};
    std::string total = act(x, "ce.sum", {}, {}, part);
    op(x, "ce.sum", "sum", {at(x, "ce.picked")}, {total});
    std::string loss;
    if (sym()) {
      // Only tp rank 0's loss is an output: one template per condition.
      for (const std::string& rest : mesh().tp_rest()) {
        Graph::When others(g, rest);
        act(x, "loss", {}, {}, part);
      }
      Graph::When first(g, mesh().tp0());
      loss = act(x, "loss", {}, {}, part);
      g.output(loss);
    } else {
      loss = act(x, "loss", {}, {}, part);
      if (x.t == 0) g.output(loss);
    }
    op(x, "loss", "scale", {total}, {loss}, {{"factor", fraction(-1, count)}});

    // d loss / d logits = (softmax - onehot) / (B*S).
    std::string probs = act(x, "ce.probs", logits_full, kVocab);
    op(x, "ce.probs", "div", {at(x, "ce.exp"), at(x, "ce.sumexp")}, {probs});
    std::string oh = onehot(x, "ce.onehot", at(x, "labels"), logits_full);
    std::string diff = act(x, "ce.diff", logits_full, kVocab);
    op(x, "ce.diff", "sub", {probs, oh}, {diff});
    std::string gl = act(x, grad("logits"), logits_full, kVocab);
    op(x, grad("logits"), "scale", {diff}, {gl}, {{"factor", fraction(1, count)}});

    const std::string nf = gather_seq(x, "final.out", hs, kResid, 1);
    const int64_t tokens = g.shape(nf)[0] * g.shape(nf)[1];
    std::string nf2 = scratch(x, "final.out.2d", {tokens, s.H});
    op(x, "final.out.2d", "reshape", {nf}, {nf2}, {{"shape", g.shape(nf2)}});
    std::string gl2 = scratch(x, grad("logits") + ".2d", {tokens, g.shape(gl)[2]});
    op(x, grad("logits") + ".2d", "reshape", {gl}, {gl2}, {{"shape", g.shape(gl2)}});
    if (s.tie) {
      std::string ge = grad_target(x, "emb", "head", g.shape(weight(x, "emb")), {tokens});
      op(x, grad("emb") + ".head", "matmul", {gl2, nf2}, {ge}, {{"transpose_a", true}});
    } else {
      std::string gw = grad_target(x, "lm", "mb", g.shape(weight(x, "lm")), {tokens});
      op(x, grad("lm") + ".matmul", "matmul", {nf2, gl2}, {gw}, {{"transpose_a", true}});
    }
  });

  each_cp(x0, [&](const Coord& xc) {
    tp_sum(xc, grad("final.out"), hs, kRow, 1, "lm_head.grad",
           [&](const Coord& x, const std::string& out) {
             if (s.tie)
               op(x, grad("final.out"), "matmul", {at(x, grad("logits")), weight(x, "emb")}, {out});
             else
               op(x, grad("final.out"), "matmul", {at(x, grad("logits")), weight(x, "lm")}, {out},
                  {{"transpose_b", true}});
           });
  });
  each_cp_tp(x0, [&](const Coord& x) {
    rmsnorm_backward(x, "final", at(x, resid(L)), "final.w", at(x, grad("final.out")),
                     grad(resid(L)), hs, kResid);
  });
}

}  // namespace shardproof::planner::transformer
