"""A ZeRO-1/2 style sharded optimizer written in train_step over a data-parallel MLP: the
flattened gradients are reduce-scattered (or all-reduced and sliced) over dp, each dp rank
builds its own optimizer over its shard of the flattened parameters (a new nn.Parameter),
steps it, and all-gathers the updated shards back into the parameters.

SHARDPROOF_ZERO_OPT picks the shard optimizer (adamw, adam, sgd, sgd-nesterov, adamw-foreach),
SHARDPROOF_ZERO_COMM the gradient collective (reduce-scatter, all-reduce).

Bugs (SHARDPROOF_EXAMPLE_BUG): wrong-shard (each rank updates the other coordinate's slice
of the parameters with its own gradient shard), gather-order (the gathered shards are put
back in reverse order), no-average (the reduce-scattered sum is not divided by dp)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import PlainMLP, bug  # noqa: E402

MESH = {"dp": 2}
HIDDEN, FFN, TOKENS = 4, 8, 8
OPT = os.environ.get("SHARDPROOF_ZERO_OPT", "adamw")
COMM = os.environ.get("SHARDPROOF_ZERO_COMM", "reduce-scatter")


def build_logical():
    return PlainMLP(HIDDEN, FFN)


def build_rank(ctx):
    return PlainMLP(HIDDEN, FFN)


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)  # unused: train_step builds its own


def shard_optimizer(params):
    if OPT == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    if OPT == "adamw-foreach":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)
    if OPT == "adam":
        return torch.optim.Adam(params, lr=1e-3, betas=(0.8, 0.99), weight_decay=0.1)
    if OPT == "sgd":
        return torch.optim.SGD(params, lr=0.1, weight_decay=0.01)
    if OPT == "sgd-nesterov":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True)
    raise ValueError(OPT)


def train_step(model, b, opt, ctx):
    group, n, c = ctx.groups["dp"], ctx.mesh["dp"], ctx.coords["dp"]
    params = list(model.parameters())
    for p in params:
        p.grad = None
    loss(model, b).backward()

    flat_grad = torch.cat([p.grad.reshape(-1) for p in params])
    size = flat_grad.numel() // n
    if COMM == "reduce-scatter":
        grad_shard = torch.empty(size)
        dist.reduce_scatter_tensor(grad_shard, flat_grad, group=group)
    else:
        dist.all_reduce(flat_grad, group=group)
        grad_shard = flat_grad[c * size:(c + 1) * size].clone()
    if not bug("no-average"):
        grad_shard = grad_shard / n

    with torch.no_grad():
        flat_param = torch.cat([p.reshape(-1) for p in params])
    mine = (n - 1 - c) if bug("wrong-shard") else c
    shard = nn.Parameter(flat_param[mine * size:(mine + 1) * size].clone())
    shard.grad = grad_shard
    shard_opt = shard_optimizer([shard])
    shard_opt.step()

    full = torch.empty(size * n)
    dist.all_gather_into_tensor(full, shard.data, group=group)
    if bug("gather-order"):
        full = torch.cat(list(full.chunk(n))[::-1])
    offset = 0
    for p in params:
        k = p.numel()
        p.data.copy_(full[offset:offset + k].view_as(p))
        offset += k
