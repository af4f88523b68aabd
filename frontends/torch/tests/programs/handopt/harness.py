"""A hand-written AdamW (mul_, add_(alpha=), addcmul_, addcdiv_, lerp_, sqrt, bias
corrections as Python floats) on a data-parallel model, in train_step, with the state
tensors created in the step (first step from zero state).

SHARDPROOF_HANDOPT picks the update: adamw (addcmul_/addcdiv_), lerp (m.lerp_(g, 1-b1),
v.mul_(b2).addcmul_(g, g, value=1-b2), p.addcdiv_(m, denom, value=-step)), sgd-momentum
(buf.mul_(m).add_(g); p.add_(buf, alpha=-lr)).

Bugs (SHARDPROOF_EXAMPLE_BUG): no-bias-correction-on-rank (dp ranks skip the bias
correction), grad-not-averaged (the all-reduced gradient is not divided by dp)."""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tplayers import PlainMLP, bug  # noqa: E402

MESH = {"dp": 2}
HIDDEN, FFN, TOKENS = 4, 8, 4
KIND = os.environ.get("SHARDPROOF_HANDOPT", "adamw")
LR, B1, B2, EPS, WD = 1e-3, 0.9, 0.95, 1e-8, 0.1


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
    return torch.optim.SGD(params, lr=LR)  # unused


def adamw_(p, g, step, corrected):
    m = torch.zeros_like(p)
    v = torch.zeros_like(p)
    if KIND == "lerp":
        m.lerp_(g, 1 - B1)
    else:
        m.mul_(B1).add_(g, alpha=1 - B1)
    v.mul_(B2).addcmul_(g, g, value=1 - B2)
    bc1 = 1 - B1 ** step if corrected else 1.0
    bc2 = 1 - B2 ** step if corrected else 1.0
    denom = (v.sqrt() / math.sqrt(bc2)).add_(EPS)
    p.mul_(1 - LR * WD)
    p.addcdiv_(m, denom, value=-LR / bc1)


def train_step(model, b, opt, ctx):
    n = ctx.mesh["dp"]
    for p in model.parameters():
        p.grad = None
    loss(model, b).backward()
    with torch.no_grad():
        for p in model.parameters():
            g = p.grad
            dist.all_reduce(g, group=ctx.groups["dp"])
            if not bug("grad-not-averaged"):
                g.div_(n)
            if KIND == "sgd-momentum":
                buf = torch.zeros_like(p)
                buf.mul_(0.9).add_(g)
                p.add_(buf, alpha=-LR)
            else:
                adamw_(p, g, 1, not (bug("no-bias-correction-on-rank") and n > 1))
