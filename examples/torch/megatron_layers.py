"""A small Megatron-style tensor-parallel toolkit, written as a user would: autograd
Functions with collectives inside, Column/RowParallelLinear, a vocab-parallel embedding and
cross entropy. With group=None every layer is its plain single-device counterpart, so the
logical and the rank models share parameter names.

SHARDPROOF_EXAMPLE_BUG selects a classic bug (see README.md)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def bug(name):
    return os.environ.get("SHARDPROOF_EXAMPLE_BUG", "") == name


class CopyToRegion(torch.autograd.Function):
    """Identity forward; all-reduce of the input gradient backward (f in Megatron)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        if not bug("no-backward-allreduce"):
            grad = grad.clone()
            dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromRegion(torch.autograd.Function):
    """All-reduce forward; identity backward (g in Megatron)."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ColumnParallelLinear(nn.Module):
    """y = x W^T + b with W split by rows (output features) over the group."""

    def __init__(self, d_in, d_out, group=None):
        super().__init__()
        self.group = group
        n = dist.get_world_size(group) if group is not None else 1
        self.weight = nn.Parameter(torch.empty(d_out // n, d_in))
        self.bias = nn.Parameter(torch.empty(d_out // n))
        for p in (self.weight, self.bias):
            p.tensor_model_parallel, p.partition_dim, p.partition_stride = True, 0, 1

    def forward(self, x):
        if self.group is not None:
            x = CopyToRegion.apply(x, self.group)
        return F.linear(x, self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """y = sum over ranks of x_r W_r^T, + b once: W split by columns (input features)."""

    def __init__(self, d_in, d_out, group=None):
        super().__init__()
        self.group = group
        n = dist.get_world_size(group) if group is not None else 1
        self.weight = nn.Parameter(torch.empty(d_out, d_in // n))
        self.bias = nn.Parameter(torch.empty(d_out))
        self.weight.tensor_model_parallel, self.weight.partition_dim = True, 1

    def forward(self, x):
        if self.group is None:
            return F.linear(x, self.weight, self.bias)
        if bug("bias-before-allreduce"):
            return ReduceFromRegion.apply(F.linear(x, self.weight, self.bias), self.group)
        return ReduceFromRegion.apply(F.linear(x, self.weight), self.group) + self.bias


def ddp_finalize(model, group, size):
    """Data-parallel gradient all-reduce and averaging."""
    for p in model.parameters():
        if p.grad is None:
            continue
        dist.all_reduce(p.grad, group=group)
        if not bug("no-ddp-average"):
            p.grad /= size
