"""nanoGPT (its model code, shrunk): tied embeddings, nn.LayerNorm, tanh GELU, a causal mask
filled with -inf, AdamW with betas; data parallel with the gradients averaged by hand.
SHARDPROOF_EXAMPLE_BUG=double-average all-reduces with AVG and then divides by dp again."""
import os

import torch
import torch.distributed as dist

from model import GPT

MESH = {"dp": 2}
BUG = os.environ.get("SHARDPROOF_EXAMPLE_BUG", "")


def build_logical():
    return GPT()


def build_rank(ctx):
    return GPT()


def batch():
    return {"idx": torch.randint(0, 32, (4, 8)), "targets": torch.randint(0, 32, (4, 8))}


BATCH_LAYOUT = {"idx": {"dp": 0}, "targets": {"dp": 0}}


def loss(model, b):
    return model(b["idx"], b["targets"])


def optimizer(params):
    return torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), weight_decay=0.1)


def finalize_grads(model, ctx):
    op = dist.ReduceOp.AVG if BUG == "double-average" else dist.ReduceOp.SUM
    for p in model.parameters():
        dist.all_reduce(p.grad, op=op, group=ctx.groups["dp"])
        p.grad /= ctx.mesh["dp"]
