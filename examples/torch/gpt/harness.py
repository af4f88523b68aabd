"""Harness: a GPT block with tensor, sequence and data parallelism (Megatron style), AdamW."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from megatron_layers import bug, ddp_finalize  # noqa: E402
from model import GPT  # noqa: E402

MESH = {"dp": 2, "tp": 2}
# Small by default (fast proofs); GPT_SIZE=medium or large gives larger and production sizes, which capture
# handles without their memory (fake tensors). GPT_LAYERS stacks layers; GPT_HEADS sets
# the heads (the small model's 2 allow tp <= 2; GPT_HEADS=4 allows tp=4).
SIZES = {
    "small": (16, 8, 2, 16, 4, 4),
    "medium": (8192, 512, 8, 2048, 256, 8),
    "large": (32768, 4096, 32, 16384, 2048, 16),
}
VOCAB, HIDDEN, HEADS, FFN, SEQ, BATCH = SIZES[os.environ.get("GPT_SIZE", "small")]
HEADS = int(os.environ.get("GPT_HEADS", HEADS))
LAYERS = int(os.environ.get("GPT_LAYERS", "1"))
SEQUENCE_PARALLEL = os.environ.get("GPT_SP", "1") != "0"  # GPT_SP=0: plain tensor parallel


def build_logical():
    return GPT(VOCAB, HIDDEN, HEADS, FFN, LAYERS)


def build_rank(ctx):
    return GPT(VOCAB, HIDDEN, HEADS, FFN, LAYERS, tp_group=ctx.groups["tp"], tp=ctx.mesh["tp"],
               sequence_parallel=SEQUENCE_PARALLEL)


def batch():
    return {"ids": torch.randint(0, VOCAB, (BATCH, SEQ)),
            "target": torch.randint(0, VOCAB, (BATCH, SEQ))}


BATCH_LAYOUT = {"ids": {"dp": 0}, "target": {"dp": 0}}


def loss(model, b):
    return model(b["ids"], b["target"])


def optimizer(params):
    return torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)


def finalize_grads(model, ctx):
    if ctx.mesh["tp"] > 1 and not bug("no-sp-norm-allreduce"):
        for p in model.norm_weights():
            dist.all_reduce(p.grad, group=ctx.groups["tp"])
    ddp_finalize(model, ctx.groups["dp"], ctx.mesh["dp"])
