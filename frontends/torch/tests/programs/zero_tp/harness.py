"""ZeRO over dp of a tensor-parallel MLP (dp x tp), per parameter: each parameter's gradient is
reduce-scattered (AVG) along dim 0 over dp, each dp rank steps an AdamW over its dim-0 shard
(a new nn.Parameter), and all_gather_into_tensor puts the shards back (with torch.no_grad():
p.copy_(full)).

Bugs (SHARDPROOF_EXAMPLE_BUG): wrong-shard (each rank takes the next coordinate's parameter
rows), sum-not-avg (the gradient is reduce-scattered with SUM and not averaged)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import MLP, bug  # noqa: E402

MESH = {"dp": 2, "tp": 2}
HIDDEN, FFN, TOKENS = 4, 8, 4


def build_logical():
    return MLP(HIDDEN, FFN)


def build_rank(ctx):
    return MLP(HIDDEN, FFN, ctx.groups["tp"])


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)  # unused


def train_step(model, b, opt, ctx):
    group, n, c = ctx.groups["dp"], ctx.mesh["dp"], ctx.coords["dp"]
    model.zero_grad(set_to_none=True)
    loss(model, b).backward()
    for p in model.parameters():
        k = p.shape[0] // n
        grad = torch.empty((k,) + tuple(p.shape[1:]))
        op = dist.ReduceOp.SUM if bug("sum-not-avg") else dist.ReduceOp.AVG
        dist.reduce_scatter_tensor(grad, p.grad.contiguous(), op=op, group=group)
        mine = (c + 1) % n if bug("wrong-shard") else c
        shard = nn.Parameter(p.detach()[mine * k:(mine + 1) * k].clone())
        shard.grad = grad
        torch.optim.AdamW([shard], lr=1e-3).step()
        full = torch.empty_like(p)
        dist.all_gather_into_tensor(full, shard.detach(), group=group)
        with torch.no_grad():
            p.copy_(full)
