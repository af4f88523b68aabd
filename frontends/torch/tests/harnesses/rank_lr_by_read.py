"""A rank-dependent learning rate, read from ctx in the way SHARDPROOF_READ says: each read
must be logged, or every rank would reuse one trace and the bug would be proven equivalent
(tests/test_rank_reads.py)."""
import copy
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
READ = os.environ.get("SHARDPROOF_READ", "getitem")
READS = {
    "getitem": lambda ctx: ctx.group_ranks["dp"][0],
    "get": lambda ctx: ctx.group_ranks.get("dp")[0],
    "coords-get": lambda ctx: ctx.coords.get("tp"),
    "coords-copy": lambda ctx: ctx.coords.copy()["tp"],
    "coords-dict": lambda ctx: dict(ctx.coords)["tp"],
    "coords-splat": lambda ctx: {**ctx.coords}["tp"],
    "coords-deepcopy": lambda ctx: copy.deepcopy(ctx.coords)["tp"],
    "coords-json": lambda ctx: json.loads(json.dumps(ctx.coords))["tp"],
    "coords-str": lambda ctx: int(str(ctx.coords)[-2]),
    "ranks-values": lambda ctx: sorted(ctx.group_ranks.values())[0][0],
    "ranks-dict": lambda ctx: dict(ctx.group_ranks)["dp"][0],
    "env-rank": lambda ctx: int(os.environ.get("RANK", "0")),        # torchrun's variables
    "env-local-rank": lambda ctx: int(os.getenv("LOCAL_RANK", "0")),
    "env-copy": lambda ctx: int(dict(os.environ)["RANK"]),
}


def build_logical():
    return nn.Linear(4, 4)


def build_rank(ctx):
    return nn.Linear(4, 4)


def batch():
    return {"x": torch.randn(4, 4), "y": torch.randn(4, 4)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(m, b):
    return F.mse_loss(m(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def train_step(m, b, opt, ctx):
    step = READS[READ](ctx)          # 0 on the single device; not 0 on some ranks
    for g in opt.param_groups:
        g["lr"] = 0.1 * (1 + step)
    opt.zero_grad()
    loss(m, b).backward()
    for p in m.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
    opt.step()
