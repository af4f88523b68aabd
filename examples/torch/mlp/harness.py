"""Harness: the Megatron-style MLP under data and tensor parallelism, trained with AdamW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from megatron_layers import ddp_finalize  # noqa: E402
from model import MLP  # noqa: E402

MESH = {"dp": 2, "tp": 2}
HIDDEN, FFN, TOKENS = (int(v) for v in os.environ.get("MLP_SIZES", "8,16,8").split(","))


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
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


def finalize_grads(model, ctx):
    ddp_finalize(model, ctx.groups["dp"], ctx.mesh["dp"])
