"""Gradient accumulation over micro-batches with loss scaling, written in train_step, on a
tensor- and data-parallel MLP; the step calls finalize_grads itself.

Bugs (SHARDPROOF_EXAMPLE_BUG): drop-micro (zero_grad inside the loop: only the last
micro-batch counts), double-micro (the first micro-batch's backward runs twice); and in the
distributed code path only (ctx.world > 1), as a bug that a single-device run cannot show:
no-unscale (the loss scale is not divided out), no-micro-divide (the micro-batch loss is not
divided by the number of micro-batches)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import MLP, bug, ddp_average  # noqa: E402

MESH = {"dp": 2, "tp": 2}
HIDDEN, FFN, TOKENS, MICRO = 8, 16, 8, 2
SCALE = 1024.0


def build_logical():
    return MLP(HIDDEN, FFN)


def build_rank(ctx):
    return MLP(HIDDEN, FFN, tp_group=ctx.groups["tp"])


def batch():
    return {"x": torch.randn(TOKENS, HIDDEN), "y": torch.randn(TOKENS, HIDDEN)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def finalize_grads(model, ctx):
    ddp_average(model, ctx.groups["dp"], ctx.mesh["dp"])


def train_step(model, b, opt, ctx):
    distributed = ctx.world > 1
    opt.zero_grad()
    xs, ys = b["x"].chunk(MICRO), b["y"].chunk(MICRO)
    for i, (x, y) in enumerate(zip(xs, ys)):
        if bug("drop-micro"):
            opt.zero_grad()
        micro = loss(model, {"x": x, "y": y})
        if not (distributed and bug("no-micro-divide")):
            micro = micro / MICRO
        (micro * SCALE).backward()
        if bug("double-micro") and i == 0:
            (loss(model, {"x": x, "y": y}) / MICRO * SCALE).backward()
    for p in model.parameters():
        if not (distributed and bug("no-unscale")):
            p.grad.div_(SCALE)
    finalize_grads(model, ctx)
    opt.step()
