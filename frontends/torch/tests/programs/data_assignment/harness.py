"""Hand-written updates through `.data`, as older training code and torch's own
`vector_to_parameters` write them: SGD by `p.data = p.data - lr * p.grad` on one parameter
group, and `vector_to_parameters` on a flattened other. `.data =` swaps storage under the
tensor without an op make_fx records: before 2026-11-29 every update vanished from the plan
and each parameter was "left as it was" on both sides, so a missing DDP average was proven
equivalent. Bug (SHARDPROOF_EXAMPLE_BUG): `no-average` (gradients summed over dp, never
divided)."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")
MESH = {"dp": 2}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def build_logical():
    return Net()


def build_rank(ctx):
    return Net()


def batch():
    return {"x": torch.randn(8, 4), "y": torch.randn(8, 2)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return ((model(b["x"]) - b["y"]) ** 2).mean()


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1)


def train_step(model, b, opt, ctx):
    loss(model, b).backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, group=ctx.groups["dp"])
        if BUG != "no-average":
            p.grad /= ctx.mesh["dp"]
    for p in model.fc1.parameters():
        p.data = p.data - 0.1 * p.grad
    fc2 = list(model.fc2.parameters())
    flat = parameters_to_vector(fc2) - 0.1 * parameters_to_vector([p.grad for p in fc2])
    vector_to_parameters(flat, fc2)
