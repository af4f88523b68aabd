"""Context parallelism as a user might write it: the sequence split over cp, keys and values
all-gathered (reduce-scattered backward), a causal mask with -inf offset by the rank's position.
SHARDPROOF_EXAMPLE_BUG=causal-offset forgets the offset; no-average skips the gradient average."""
import math, os
import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist

MESH = {"cp": 2}
S, B, H = 8, 2, 8
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


class Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, n):
        ctx.group, ctx.n = group, n
        out = x.new_empty((x.shape[0] * n,) + tuple(x.shape[1:]))
        dist.all_gather_into_tensor(out, x.contiguous(), group=group)
        return out

    @staticmethod
    def backward(ctx, g):
        out = g.new_empty((g.shape[0] // ctx.n,) + tuple(g.shape[1:]))
        dist.reduce_scatter_tensor(out, g.contiguous(), group=ctx.group)
        return out, None, None


class Attn(nn.Module):
    def __init__(self, group=None, n=1, rank=0):
        super().__init__()
        self.qkv = nn.Linear(H, 3 * H)
        self.out = nn.Linear(H, H)
        self.group, self.n, self.rank = group, n, rank

    def forward(self, x):  # x [s, B, H]
        s = x.shape[0]
        q, k, v = self.qkv(x).chunk(3, -1)
        if self.group is not None:
            k = Gather.apply(k, self.group, self.n)
            v = Gather.apply(v, self.group, self.n)
        offset = self.rank * s if BUG != "causal-offset" else 0
        qpos = torch.arange(s) + offset
        kpos = torch.arange(k.shape[0])
        scores = torch.einsum("sbh,tbh->bst", q, k) / math.sqrt(H)
        scores = scores.masked_fill(kpos[None, None, :] > qpos[None, :, None], float("-inf"))
        p = scores.softmax(-1)
        o = torch.einsum("bst,tbh->sbh", p, v)
        return self.out(o)


def build_logical():
    return Attn()


def build_rank(ctx):
    return Attn(ctx.groups["cp"], ctx.mesh["cp"], ctx.coords["cp"])


def batch():
    return {"x": torch.randn(S, B, H), "y": torch.randn(S, B, H)}


BATCH_LAYOUT = {"x": {"cp": 0}, "y": {"cp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["cp"])
        if BUG != "no-average":
            p.grad /= ctx.mesh["cp"]
