"""Pipeline parallelism over a `pp` axis with dist.send/dist.recv, combined with data
parallelism: stage 0 holds layers.0 and sends its activations forward, stage 1 holds
layers.1, receives them, computes the loss and sends the activation gradient back; GPipe
order over two micro-batches; then the data-parallel gradient average and the optimizer.

Bugs (SHARDPROOF_EXAMPLE_BUG): swap-replica-grad (stage 1 sends the activation gradient to
the stage 0 of the other data-parallel replica, which receives it from there),
ignore-recv-grad (stage 0 back-propagates ones instead of the received gradient),
micro-order (stage 1 pairs micro-batch 0's labels with micro-batch 1's activations).

SHARDPROOF_PP_P2P=batch sends the gradients back with batch_isend_irecv and P2POp
(Megatron's schedules) instead of send/recv."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import bug, ddp_average  # noqa: E402

MESH = {"pp": 2, "dp": 2}
BATCHED = os.environ.get("SHARDPROOF_PP_P2P", "") == "batch"
HIDDEN, FFN, TOKENS, MICRO = 4, 8, 8, 2


class Net(nn.Module):
    """layers.0: Linear + tanh (stage 0); layers.1: Linear (stage 1)."""

    def __init__(self, stages=(0, 1)):
        super().__init__()
        make = {0: lambda: nn.Linear(HIDDEN, FFN), 1: lambda: nn.Linear(FFN, HIDDEN)}
        self.layers = nn.ModuleDict({str(s): make[s]() for s in stages})

    def stage(self, s, x):
        x = self.layers[str(s)](x)
        return torch.tanh(x) if s == 0 else x

    def forward(self, x):
        return self.stage(1, self.stage(0, x))


def build_logical():
    return Net()


def build_rank(ctx):
    return Net(stages=(ctx.coords["pp"],))


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3)


def other_replica(ctx, stage):
    """The rank of `stage` in the next data-parallel replica (ranks are row-major: pp, dp)."""
    dp = ctx.mesh["dp"]
    return stage * dp + (ctx.coords["dp"] + 1) % dp


def pipeline_step(model, b, ctx):
    stage = ctx.coords["pp"]
    line = ctx.group_ranks["pp"]            # this replica's stage ranks
    xs, ys = b["x"].chunk(MICRO), b["y"].chunk(MICRO)
    if stage == 0:
        acts = []
        for x in xs:
            a = model.stage(0, x)
            dist.send(a.detach(), line[1])
            acts.append(a)
        peer = line[1]
        if bug("swap-replica-grad"):
            peer = other_replica(ctx, 1)
        grads = [torch.empty_like(a) for a in acts]
        if BATCHED:
            for w in dist.batch_isend_irecv([dist.P2POp(dist.irecv, g, peer) for g in grads]):
                w.wait()
        else:
            for g in grads:
                dist.recv(g, peer)
        for a, g in zip(acts, grads):
            a.backward(torch.ones_like(a) if bug("ignore-recv-grad") else g)
    else:
        received = []
        for x in xs:
            a = torch.empty(x.shape[0], FFN)
            dist.recv(a, line[0])
            received.append(a.requires_grad_())
        peer = line[0]
        if bug("swap-replica-grad"):
            peer = other_replica(ctx, 0)
        if bug("micro-order"):
            ys = ys[::-1]
        for a, y in zip(received, ys):
            (F.mse_loss(model.stage(1, a), y) / MICRO).backward()
        if BATCHED:
            dist.batch_isend_irecv([dist.P2POp(dist.isend, a.grad, peer) for a in received])
        else:
            for a in received:
                dist.send(a.grad, peer)


def train_step(model, b, opt, ctx):
    opt.zero_grad()
    if ctx.mesh["pp"] == 1:
        for x, y in zip(b["x"].chunk(MICRO), b["y"].chunk(MICRO)):
            (loss(model, {"x": x, "y": y}) / MICRO).backward()
    else:
        pipeline_step(model, b, ctx)
    ddp_average(model, ctx.groups["dp"], ctx.mesh["dp"])
    opt.step()
