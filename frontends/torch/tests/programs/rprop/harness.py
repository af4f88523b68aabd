"""torch.optim.Rprop, traced through like user code (sign, comparisons, where, clamp) after a
DDP all-reduce, on a non-square linear layer. Claim inference claims Rprop's copy of the
gradient (`where(c, 0, grad)`) as the logical `mm` the gradient is the double transpose of;
the update stage then reads both, and was refuted for values no run has until a cut tensor
could be defined from another through transposes (engine/stage/defined_cut.h).
Rprop's first step is -lr * sign(grad): a positive scale of the gradient does not change it,
so `sum-not-average` is equivalent (and must be); `no-allreduce` (each rank steps with its own
gradient) is not."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")
MESH = {"dp": 2}


def build_logical():
    return nn.Linear(4, 6)


def build_rank(ctx):
    return nn.Linear(4, 6)


def batch():
    return {"x": torch.randn(4, 4), "y": torch.randn(4, 6)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.Rprop(params, lr=0.01)


def finalize_grads(model, ctx):
    for p in model.parameters():
        if BUG == "no-allreduce":
            continue
        if BUG == "sum-not-average":
            dist.all_reduce(p.grad, group=ctx.groups["dp"])
        else:
            dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=ctx.groups["dp"])
