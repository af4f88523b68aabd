"""A tiny tensor-parallel toolkit shared by the probe programs, written as a user would:
Megatron's f/g regions as autograd Functions, Column/RowParallelLinear, a two-layer MLP.
With group=None every layer is its single-device counterpart (same parameter names)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def bug(name):
    """SHARDPROOF_EXAMPLE_BUG selects one bug of a probe program."""
    return os.environ.get("SHARDPROOF_EXAMPLE_BUG", "") == name


class CopyToRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class ReduceFromRegion(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        x = x.clone()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ColumnParallelLinear(nn.Module):
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
        return ReduceFromRegion.apply(F.linear(x, self.weight), self.group) + self.bias


class MLP(nn.Module):
    """Column-parallel fc1, GELU, row-parallel fc2."""

    def __init__(self, hidden, ffn, tp_group=None):
        super().__init__()
        self.fc1 = ColumnParallelLinear(hidden, ffn, tp_group)
        self.fc2 = RowParallelLinear(ffn, hidden, tp_group)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class PlainMLP(nn.Module):
    """nn.Linear, ReLU, nn.Linear: replicated under data parallelism."""

    def __init__(self, hidden, ffn):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def ddp_average(model, group, size):
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad, group=group)
            p.grad /= size
