"""Gradient clipping by a global norm, in finalize_grads.

SHARDPROOF_CLIP picks the program:
- ddp: a replicated model under data parallelism; grads all-reduced and averaged, then
  torch.nn.utils.clip_grad_norm_ (every rank holds the whole gradient); ddp-inf: the same
  with norm_type=inf.
- tp: a tensor-parallel MLP (dp x tp); the global norm is the sum of squares of the sharded
  gradients all-reduced over tp, plus the replicated ones counted once, then sqrt; the clip
  coefficient is min(1, max_norm / (norm + eps)).

Bugs (SHARDPROOF_EXAMPLE_BUG): local-norm (tp: the shard's own norm, no all-reduce),
replicated-twice (tp: the replicated gradients' squares are all-reduced too, counted tp
times), clip-before-average (ddp: clipping before the data-parallel average)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import MLP, PlainMLP, bug, ddp_average  # noqa: E402

KIND = os.environ.get("SHARDPROOF_CLIP", "tp")
MESH = {"dp": 2, "tp": 2} if KIND == "tp" else {"dp": 2}
NORM_TYPE = float("inf") if KIND == "ddp-inf" else 2.0
HIDDEN, FFN, TOKENS = 4, 8, 4
MAX_NORM, EPS = 1.0, 1e-6


def build_logical():
    return MLP(HIDDEN, FFN) if KIND == "tp" else PlainMLP(HIDDEN, FFN)


def build_rank(ctx):
    return MLP(HIDDEN, FFN, ctx.groups["tp"]) if KIND == "tp" else PlainMLP(HIDDEN, FFN)


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def tp_clip(model, group):
    sharded = torch.zeros(())
    replicated = torch.zeros(())
    for p in model.parameters():
        sq = (p.grad * p.grad).sum()
        if getattr(p, "tensor_model_parallel", False) or bug("replicated-twice"):
            sharded = sharded + sq
        else:
            replicated = replicated + sq
    if not bug("local-norm"):
        dist.all_reduce(sharded, group=group)
    norm = torch.sqrt(sharded + replicated)
    coef = torch.clamp(MAX_NORM / (norm + EPS), max=1.0)
    for p in model.parameters():
        p.grad.mul_(coef)


def finalize_grads(model, ctx):
    if KIND == "tp":
        ddp_average(model, ctx.groups["dp"], ctx.mesh["dp"])
        tp_clip(model, ctx.groups["tp"])
        return
    if bug("clip-before-average"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM, NORM_TYPE)
    ddp_average(model, ctx.groups["dp"], ctx.mesh["dp"])
    if not bug("clip-before-average"):
        torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM, NORM_TYPE)
