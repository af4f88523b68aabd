"""Data parallelism through groups of the program's own (dist.new_group over every dp line,
as Megatron's initialize_model_parallel builds them) and a parameter broadcast after the
step from the first rank of each line (a "sync" of replicas that should already agree).

Bugs (SHARDPROOF_EXAMPLE_BUG): no-allreduce (each replica steps on its own gradient, and
the broadcast hides the difference behind rank 0's update), broadcast-grad (the gradient is
broadcast from the line's first rank instead of all-reduced).

(A broadcast of the parameters *before* the step is no bug: replicas agree on entry.)"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import PlainMLP, bug  # noqa: E402

MESH = {"dp": 2}
HIDDEN, FFN, TOKENS = 4, 8, 4


def build_logical():
    return PlainMLP(HIDDEN, FFN)


def build_rank(ctx):
    return PlainMLP(HIDDEN, FFN)


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.Adam(params, lr=1e-3)


def data_parallel_group(ctx):
    """Every rank creates every dp line's group (in the same order) and keeps its own."""
    n, world = ctx.mesh["dp"], dist.get_world_size()
    mine = None
    for start in range(world // n):
        ranks = [start + k * (world // n) for k in range(n)]
        g = dist.new_group(ranks)
        if dist.get_rank() in ranks:
            mine = (g, ranks)
    return mine


def sync(model, group, root):
    for p in model.parameters():
        dist.broadcast(p.data, src=root, group=group)


def train_step(model, b, opt, ctx):
    group, ranks = data_parallel_group(ctx)
    n = dist.get_world_size(group)
    opt.zero_grad()
    loss(model, b).backward()
    for p in model.parameters():
        if bug("broadcast-grad"):
            dist.broadcast(p.grad, src=ranks[0], group=group)
        elif not bug("no-allreduce"):
            dist.all_reduce(p.grad, group=group)
        p.grad.div_(n)
    opt.step()
    sync(model, group, ranks[0])
