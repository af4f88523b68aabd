"""A data-parallel model that scales a hidden tensor by a broadcast parameter
(`scale.expand_as(y)`): on each rank the broadcast equals every row block of the logical one,
so its values do not say which block it is.

Bug (SHARDPROOF_EXAMPLE_BUG): no-average (gradients are summed over dp, not averaged)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2}
H, T = 4, 4


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(H, H)
        self.scale = nn.Parameter(torch.empty(H))

    def forward(self, x):
        y = torch.tanh(self.fc(x))
        return self.fc(y * self.scale.expand_as(y))


def build_logical():
    return Scaled()


def build_rank(ctx):
    return Scaled()


def batch():
    return {"x": torch.randn(T, H), "y": torch.randn(T, H)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        if os.environ.get("SHARDPROOF_EXAMPLE_BUG", "") != "no-average":
            p.grad /= ctx.mesh["dp"]
