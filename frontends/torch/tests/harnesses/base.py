"""A small valid harness the bad-input harnesses start from: a linear layer, dp only."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)


def build_logical():
    return Net()


def build_rank(ctx):
    return Net()


def batch():
    return {"x": torch.randn(4, 4), "y": torch.randn(4, 4)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def finalize_grads(model, ctx):
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
