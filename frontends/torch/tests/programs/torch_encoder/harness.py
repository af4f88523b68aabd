"""torch.nn's own transformer layer (nn.TransformerEncoderLayer: nn.MultiheadAttention, a causal
float mask of 0 and -inf from nn.Transformer.generate_square_subsequent_mask), data parallel with
the average by ReduceOp.AVG; SGD with momentum. SHARDPROOF_EXAMPLE_BUG=sum-not-average all-reduces
with SUM and no division."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

MESH = {"dp": 2}
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")
S, D = 4, 8


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(D, 2, 16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.head(self.layer(x, src_mask=mask)).squeeze(-1)


def build_logical():
    return Net()


def build_rank(ctx):
    return Net()


def batch():
    return {"x": torch.randn(4, S, D), "y": torch.randn(4, S)}


BATCH_LAYOUT = {"x": {"dp": 0}, "y": {"dp": 0}}


def loss(model, b):
    return F.mse_loss(model(b["x"]), b["y"])


def optimizer(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def finalize_grads(model, ctx):
    op = dist.ReduceOp.SUM if BUG == "sum-not-average" else dist.ReduceOp.AVG
    for p in model.parameters():
        dist.all_reduce(p.grad, op=op, group=ctx.groups["dp"])
