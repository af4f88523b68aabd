"""Tensor-parallel causal attention at sizes a user tries first (hidden 64, 4 heads, batch 8,
sequence 64), Adam: the plan has ~5 million elements, and its logical blocks are indexed for
claim inference once per parallel shape that divides them (the scores [8, 4, 64, 64] by many).
A budget shared by indexing and evaluation stopped inference here, and without intermediate
claims every gradient stage held the whole step: *unknown*. Bugs (SHARDPROOF_EXAMPLE_BUG): `allreduce-max` (the row-parallel output reduced
with MAX), `v-input-grad-local` (the value projection bypasses the copy region, so its input
gradient is not all-reduced over tp: only the norm's gradients are wrong)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402

from tplayers import ColumnParallelLinear, RowParallelLinear, bug  # noqa: E402

MESH = {"dp": 1, "tp": 2}
D, HEADS, B, S = 64, 4, 8, 64


class ReduceMax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.MAX, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Attention(nn.Module):
    def __init__(self, group=None):
        super().__init__()
        n = dist.get_world_size(group) if group is not None else 1
        self.group, self.heads, self.hd = group, HEADS // n, D // HEADS
        self.norm = nn.LayerNorm(D)
        self.q = ColumnParallelLinear(D, D, group)
        self.k = ColumnParallelLinear(D, D, group)
        self.v = ColumnParallelLinear(D, D, group)
        self.o = RowParallelLinear(D, D, group)

    def split(self, t):
        return t.reshape(B, S, self.heads, self.hd).permute(0, 2, 1, 3)

    def forward(self, x):
        h = self.norm(x)
        v_in = nn.functional.linear(h, self.v.weight, self.v.bias) \
            if self.group is not None and bug("v-input-grad-local") else self.v(h)
        q, k, v = self.split(self.q(h)), self.split(self.k(h)), self.split(v_in)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
        ctx = torch.matmul(torch.softmax(scores, -1), v).permute(0, 2, 1, 3)
        ctx = ctx.reshape(B, S, self.heads * self.hd)
        if self.group is not None and bug("allreduce-max"):
            return x + ReduceMax.apply(nn.functional.linear(ctx, self.o.weight),
                                       self.group) + self.o.bias
        return x + self.o(ctx)


def build_logical():
    return Attention()


def build_rank(ctx):
    return Attention(ctx.groups["tp"])


def batch():
    return {"x": torch.randn(B, S, D), "y": torch.randn(B, S, D)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return ((model(b["x"]) - b["y"]) ** 2).mean()


def optimizer(params):
    return torch.optim.Adam(params, lr=3e-4, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)
