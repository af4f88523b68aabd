"""Causal self-attention written with torch.einsum, as many teams write it: scores
einsum('bhqd,bhkd->bhqk'), a torch.where(-inf) causal mask from torch.triu, heads split over
tp (column-parallel QKV without bias, row-parallel output); LayerNorm; SGD; dp x tp.
SHARDPROOF_EXAMPLE_BUG selects a bug."""
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
B, S, H, NH = 4, 8, 32, 4
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


class Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g):
        ctx.g = g
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.g)
        return grad, None


class Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g):
        x = x.clone()
        dist.all_reduce(x, group=g)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Attention(nn.Module):
    def __init__(self, tp_group=None, tp=1):
        super().__init__()
        self.g, self.nh, self.hd = tp_group, NH // tp, H // NH
        self.ln = nn.LayerNorm(H)
        self.q = nn.Linear(H, H // tp, bias=False)
        self.k = nn.Linear(H, H // tp, bias=False)
        self.v = nn.Linear(H, H // tp, bias=False)
        self.o = nn.Linear(H // tp, H, bias=False)
        if tp_group is not None:
            for lin, d in ((self.q, 0), (self.k, 0), (self.v, 0), (self.o, 1)):
                lin.weight.tensor_model_parallel, lin.weight.partition_dim = True, d

    def heads(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.nh, self.hd).permute(0, 2, 1, 3)

    def forward(self, x):
        h = self.ln(x)
        if self.g is not None:
            h = Copy.apply(h, self.g)
        q, k, v = self.heads(self.q(h)), self.heads(self.k(h)), self.heads(self.v(h))
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.hd)
        s = x.shape[1]
        future = torch.triu(torch.ones(s, s, dtype=torch.bool),
                            diagonal=0 if BUG == "mask-diagonal" else 1)
        scores = torch.where(future, torch.tensor(float("-inf")), scores)
        att = F.softmax(scores, dim=-1)
        o = torch.einsum("bhqk,bhkd->bqhd", att, v).reshape(x.shape[0], s, self.nh * self.hd)
        o = self.o(o)
        if self.g is not None and BUG != "no-forward-reduce":
            o = Reduce.apply(o, self.g)
        return x + o


def build_logical():
    return Attention()


def build_rank(ctx):
    return Attention(ctx.groups["tp"], ctx.mesh["tp"])


def batch():
    return {"x": torch.randn(B, S, H), "y": torch.randn(B, S, H)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
