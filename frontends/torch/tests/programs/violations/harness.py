"""train_step programs that break the contract; each must be exit 2 at its line
(SHARDPROOF_VIOLATION picks one):
- adam-twice: a shard optimizer (Adam) built in train_step is stepped twice
- unmatched-recv: the last stage receives a gradient nobody sends
- unequal-split: all_to_all_single with unequal splits
- group-send: send to a global rank outside the group it names
- item-clip: clipping written with .item() (a value read in Python)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import PlainMLP, ddp_average  # noqa: E402

MESH = {"dp": 2}
HIDDEN, FFN, TOKENS = 4, 8, 4
WHICH = os.environ.get("SHARDPROOF_VIOLATION", "adam-twice")


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
    return torch.optim.SGD(params, lr=0.1)


def train_step(model, b, opt, ctx):
    opt.zero_grad()
    loss(model, b).backward()
    ddp_average(model, ctx.groups["dp"], ctx.mesh["dp"])
    if WHICH == "adam-twice":
        shard = nn.Parameter(model.fc1.weight.detach().clone())
        shard.grad = model.fc1.weight.grad
        adam = torch.optim.Adam([shard], lr=1e-3)
        adam.step()
        adam.step()
        with torch.no_grad():
            model.fc1.weight.copy_(shard)
    elif WHICH == "unmatched-recv" and ctx.world > 1:
        g = torch.empty(HIDDEN)
        if ctx.coords["dp"] == 1:
            dist.recv(g, 0)
    elif WHICH == "unequal-split" and ctx.world > 1:
        out = torch.empty(TOKENS, HIDDEN)
        dist.all_to_all_single(out, torch.zeros(TOKENS, HIDDEN), [1, 3], [1, 3],
                               group=ctx.groups["dp"])
    elif WHICH == "group-send" and ctx.world > 1:
        if ctx.coords["dp"] == 0:
            dist.send(model.fc1.weight.grad, 1, group=dist.new_group([0]))
    elif WHICH == "item-clip":
        norm = torch.sqrt(sum((p.grad * p.grad).sum() for p in model.parameters()))
        if norm.item() > 1.0:
            for p in model.parameters():
                p.grad.div_(norm)
    opt.step()
