"""A tensor-parallel MLP that finds its group through parallel_state (no group argument)."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import parallel_state as ps


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g, group=ps.get_tensor_model_parallel_group())
        return g


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.clone()
        dist.all_reduce(x, op=dist.ReduceOp.SUM, group=ps.get_tensor_model_parallel_group())
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class MLP(nn.Module):
    def __init__(self, h, ff, parallel):
        super().__init__()
        self.parallel = parallel
        tp = ps.get_tensor_model_parallel_world_size() if parallel else 1
        self.fc1 = nn.Linear(h, ff // tp)
        self.fc2 = nn.Linear(ff // tp, h, bias=False)
        self.bias = nn.Parameter(torch.zeros(h))
        if parallel:
            for p, d in ((self.fc1.weight, 0), (self.fc1.bias, 0), (self.fc2.weight, 1)):
                p.tensor_model_parallel = True
                p.partition_dim = d
                p.partition_stride = 1

    def forward(self, x):
        if self.parallel:
            x = _CopyToTP.apply(x)
        y = self.fc2(F.silu(self.fc1(x)))
        if self.parallel:
            y = _ReduceFromTP.apply(y)
        return y + self.bias
