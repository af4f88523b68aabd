"""Collectives called directly on tensors that autograd tracks, with no autograd.Function:
torch.distributed is invisible to autograd (its kernels write the tensor's memory), so the
gradient passes a collective as if it were not there.

- The row-parallel projection's partial sums are all-reduced in place in forward
  (`dist.all_reduce(out, group=tp)`). Backward then treats the all-reduce as the identity,
  which is right for a sum whose upstream gradient is the same on every tp rank.
- The column-parallel input's gradient is summed over tp by a tensor hook that all-reduces
  the gradient in place.
So this naive tensor-parallel MLP is correct, and shardproof must prove it (dp x tp).

Bug (SHARDPROOF_EXAMPLE_BUG): no-input-grad-reduce (the hook is not registered)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2, "tp": 2}
B, H, FF = 4, 8, 16
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


class MLP(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.group = group
        self.up = nn.Linear(H, FF // tp)
        self.down = nn.Linear(FF // tp, H, bias=False)
        self.bias = nn.Parameter(torch.zeros(H))
        if group is not None:
            for p, d in ((self.up.weight, 0), (self.up.bias, 0), (self.down.weight, 1)):
                p.tensor_model_parallel, p.partition_dim = True, d

    def forward(self, x):
        x = x * 1.0  # a non-leaf: its gradient is all-reduced by the hook
        if self.group is not None and x.requires_grad and BUG != "no-input-grad-reduce":
            x.register_hook(self._reduce_grad)
        out = self.down(torch.tanh(self.up(x)))
        if self.group is not None:
            dist.all_reduce(out, group=self.group)
        return out + self.bias

    def _reduce_grad(self, grad):
        grad = grad.clone()
        dist.all_reduce(grad, group=self.group)
        return grad


class Net(nn.Module):
    def __init__(self, group=None, tp=1):
        super().__init__()
        self.inp = nn.Linear(H, H)
        self.mlp = MLP(group, tp)

    def forward(self, x):
        return self.mlp(self.inp(x))


def build_logical():
    return Net()


def build_rank(ctx):
    return Net(ctx.groups["tp"], ctx.mesh["tp"])


def batch():
    return {"x": torch.randn(B, H), "y": torch.randn(B, H)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
