"""Sequence parallelism written by hand on batch-first activations [batch, seq, hidden], with
torch 1.13's flat-buffer collectives `dist._all_gather_base` / `dist._reduce_scatter_base`
(they cut dim 0, so the sequence is moved first and back with transposes); a pre-norm MLP block
(`nn.LayerNorm` with bias, column-parallel fc1 with bias, `GELU(approximate="tanh")`,
row-parallel fc2 whose bias is added after the reduce-scatter), dropout written with p = 0
(`nn.Dropout(0.0)`, `F.dropout(p=0.0, training=True)`); the output all-gathered along the
sequence for an MSE loss against the whole target; data parallelism as a hand-written
bucketed all-reduce (DDP-like: buckets of flattened gradients in reverse parameter order,
capped by size, `torch.cat` then `split` back); the sequence-parallel parameters' gradients
(norms, fc2's bias) summed over tp the same way; Adam with L2 weight decay; dp x tp.

Bugs (SHARDPROOF_EXAMPLE_BUG):
- rs-wrong-dim: the reduce-scatter helper forgets to move the sequence dim first, so the
  flat buffer is cut along the batch dim (the shapes still fit: same number of elements).
- bucket-tail-dropped: the bucketing loop never flushes its last, partly filled bucket, so
  those gradients are not all-reduced over dp."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
B, S, H, FF = 4, 8, 16, 32
BUCKET_CAP = 600  # elements per bucket
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


def _gather_seq(x, group):
    """[b, s/tp, h] on each rank -> [b, s, h], sequence chunks in rank order."""
    tp = dist.get_world_size(group)
    b, s, h = x.shape
    src = x.transpose(0, 1).contiguous()
    out = torch.empty(s * tp, b, h, dtype=x.dtype)
    dist._all_gather_base(out, src, group=group)
    return out.transpose(0, 1).contiguous()


def _reduce_scatter_seq(x, group):
    """[b, s, h] partial sums -> this rank's [b, s/tp, h] chunk of their sum over tp."""
    tp = dist.get_world_size(group)
    b, s, h = x.shape
    src = x.contiguous() if BUG == "rs-wrong-dim" else x.transpose(0, 1).contiguous()
    out = torch.empty(s // tp, b, h, dtype=x.dtype)
    dist._reduce_scatter_base(out, src, group=group)
    return out.transpose(0, 1).contiguous()


class GatherFromSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_seq(grad, ctx.group), None


class ReduceScatterToSequenceParallel(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _gather_seq(grad, ctx.group), None


class GatherOutput(torch.autograd.Function):
    """The whole sequence for the loss; every tp rank computes the same loss, so backward
    keeps this rank's own sequence chunk of the gradient."""
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _gather_seq(x, group)

    @staticmethod
    def backward(ctx, grad):
        tp = dist.get_world_size(ctx.group)
        rank = dist.get_rank(ctx.group)
        return grad.chunk(tp, dim=1)[rank].contiguous(), None


class MLPBlock(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.group = group
        self.norm = nn.LayerNorm(H, eps=1e-5)
        self.fc1 = nn.Linear(H, FF // tp)
        self.act = nn.GELU(approximate="tanh")
        self.drop = nn.Dropout(0.0)
        self.fc2 = nn.Linear(FF // tp, H)
        if group is not None:
            for p, d in ((self.fc1.weight, 0), (self.fc1.bias, 0), (self.fc2.weight, 1)):
                p.tensor_model_parallel, p.partition_dim = True, d
            for p in (self.norm.weight, self.norm.bias, self.fc2.bias):
                p.sequence_parallel = True

    def forward(self, x):
        h = self.norm(x)
        if self.group is not None:
            h = GatherFromSequenceParallel.apply(h, self.group)
        h = self.drop(self.act(self.fc1(h)))
        h = F.linear(h, self.fc2.weight)
        if self.group is not None:
            h = ReduceScatterToSequenceParallel.apply(h, self.group)
        h = F.dropout(h + self.fc2.bias, p=0.0, training=self.training)
        return x + h


class Regressor(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.group = group
        self.block = MLPBlock(group, tp)
        self.final_norm = nn.LayerNorm(H)
        if group is not None:
            self.final_norm.weight.sequence_parallel = True
            self.final_norm.bias.sequence_parallel = True

    def forward(self, x):
        out = self.final_norm(self.block(x))
        if self.group is not None:
            out = GatherOutput.apply(out, self.group)
        return out


def build_logical():
    return Regressor()


def build_rank(ctx):
    return Regressor(ctx.groups["tp"], ctx.mesh["tp"])


def batch():
    return {"x": torch.randn(B, S, H), "y": torch.randn(B, S, H)}


BATCH_LAYOUT = {"x": {"dp": 0, "tp": 1}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.Adam(params, lr=1e-3, weight_decay=0.01)


def make_buckets(params, cap):
    buckets, current, size = [], [], 0
    for p in reversed(params):  # as DDP: gradients become ready in reverse order
        if current and size + p.numel() > cap:
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel()
    if current and BUG != "bucket-tail-dropped":
        buckets.append(current)
    return buckets


def all_reduce_flat(params, group, divide_by=None):
    flat = torch.cat([p.grad.reshape(-1) for p in params])
    dist.all_reduce(flat, group=group)
    if divide_by is not None:
        flat.div_(divide_by)
    for p, g in zip(params, flat.split([p.numel() for p in params])):
        p.grad.copy_(g.view_as(p.grad))


def finalize_grads(model, ctx):
    params = list(model.parameters())
    sp = [p for p in params if getattr(p, "sequence_parallel", False)]
    if sp:
        all_reduce_flat(sp, ctx.groups["tp"])
    for bucket in make_buckets(params, BUCKET_CAP):
        all_reduce_flat(bucket, ctx.groups["dp"], ctx.mesh["dp"])
